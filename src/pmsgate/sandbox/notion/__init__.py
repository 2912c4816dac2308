"""Emulator of the notes workspace (the Notion API), following docs/knowledge-sync.md.

``store.NotionStore`` holds the state (per workspace / integration token) and the
limits, ``app.create_notion_app`` puts the Notion wire shapes and the ``/_sandbox/``
test controls on top, ``seed`` builds the apartments' pages from the booking-system
emulator's facilities.
"""
