"""The console's Jinja2 templates (``web/templates``), shared by every HTML route."""

from __future__ import annotations

from pathlib import Path

from fastapi.templating import Jinja2Templates

TEMPLATES_DIR = Path(__file__).parent / "templates"

# Autoescaping is on for .html (Starlette's default), so user text never becomes markup.
templates = Jinja2Templates(directory=TEMPLATES_DIR)
