"""`pmsgate doctor`: is this deployment ready, and do the real upstreams behave as we assume?

Without ``--live`` it checks what a deployment controls: the configuration, the
database (reachable, migrated), Redis, and that each upstream answers at all. With
``--live`` it runs a short **read-only first-contact probe** of one real facility,
workspace and notes connection — a handful of requests, every booking-system one
through the facility's limiter and token manager — and reports which shapes the real
systems show (token location, envelopes, pagination and filter behaviour, the
``guest_portal`` shape, the path form) and which of pmsgate's assumptions hold,
with what to set when one does not. It stores nothing and prints nothing secret.

- :mod:`.findings` — a finding (area, check, status, what was found, what to do) and the report;
- :mod:`.local` — configuration, database, Redis;
- :mod:`.kross`, :mod:`.assistant`, :mod:`.notes` — one probe per upstream;
- :mod:`.runner` — runs them in order; :mod:`.command` — the `pmsgate doctor` command (light:
  it imports the runner only when run).
"""
