"""The knowledge bridge (docs/requirements.md R16, R17): notes pages to KB nodes.

- :mod:`pmsgate.knowledge.template` checks a notes page against the five canonical
  sections of the catalogue's knowledge template, by section titles only, and
  extracts the WiFi network and password.
- :mod:`pmsgate.knowledge.patcher` plans and applies the changes that make a page
  canonical (docs/requirements.md R16.4, R16.5); a second run changes nothing.
- :mod:`pmsgate.knowledge.sync` turns checked pages into KB nodes, one directory per listing.
- :mod:`pmsgate.cli.knowledge` is ``pmsgate knowledge check|patch``.
"""
