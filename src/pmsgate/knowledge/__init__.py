"""The knowledge bridge (spec §2.4 knowledge template, §4.3 steps 10-14): notes pages to KB nodes.

- :mod:`pmsgate.knowledge.template` checks a notes page against the five canonical
  sections of the catalogue's knowledge template, by section titles only, and
  extracts the WiFi network and password.
- :mod:`pmsgate.knowledge.patcher` plans and applies the changes that make a page
  canonical (spec §4.3 step 13); a second run changes nothing.
- :mod:`pmsgate.knowledge.sync` turns checked pages into KB nodes, one directory per listing.
- :mod:`pmsgate.knowledge.cli` is ``pmsgate knowledge check|patch``.
"""
