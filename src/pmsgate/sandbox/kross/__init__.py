"""Emulator of the Kross Booking API v5, following ``docs/kross-api.md``.

``store.KrossStore`` holds the state (per facility) and the semantics,
``app.create_kross_app`` puts the wire contract and the ``/_sandbox/`` test controls on top.
"""
