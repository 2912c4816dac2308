"""The clients of the three systems pmsgate does not own, one package each.

- ``kross``: the booking system (Kross Booking API v5) — the only code that speaks to it;
- ``assistant``: the assistant platform's ``/v1`` API;
- ``notion``: the notes workspace (the Notion API, through ``notion-client``);
- ``kit``: what the three share (errors, classification tables, retries, deadlines).

Their emulators live under ``pmsgate.sandbox`` with the same names.
"""
