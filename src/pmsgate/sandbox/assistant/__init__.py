"""Emulator of the assistant platform's ``/v1`` API, following ``docs/platform-api.md``.

``store.PlatformStore`` holds the state (per workspace) and the semantics,
``app.create_platform_app`` puts the wire contract and the ``/_sandbox/`` test controls
on top, ``runner`` executes custom tools' Python code in a subprocess.
"""
