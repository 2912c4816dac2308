"""Emulator of the assistant platform's ``/v1`` API, following ``docs/assistant-api.md``.

``store.AssistantStore`` holds the state (per workspace) and the semantics,
``app.create_assistant_app`` puts the wire contract and the ``/_sandbox/`` test controls
on top, ``runner`` executes custom tools' Python code in a subprocess.
"""
