"""The console's Jinja2 templates (``web/templates``), shared by every HTML route.

Every word a customer reads is in ``{% trans %}`` (Jinja2's i18n extension, newstyle
gettext: variables are ``%(name)s`` and autoescaped), translated through the Babel
catalogues of :mod:`pmsgate.i18n` in the reader's language. Dates and times go
through the filters ``datetime``, ``date``, ``time`` and ``ago``: the reader's time zone
and locale, never a raw ``strftime``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.templating import Jinja2Templates

from pmsgate import i18n
from pmsgate.version import build_info
from pmsgate.web import registry_words
from pmsgate.web.page_errors import page_error_words

TEMPLATES_DIR = Path(__file__).parent / "templates"


def _page_globals(request: Request) -> dict[str, Any]:
    """What every page may use: the reader's language, the brand and the support contact."""
    container = getattr(request.app.state, "container", None)
    settings = getattr(container, "settings", None)
    return {
        "lang": i18n.current_language(),
        "languages": i18n.LANGUAGE_NAMES,
        "brand": settings.brand_name if settings is not None else "Guest Assistant",
        "support_email": getattr(settings, "support_email", None),
        "support_phone": getattr(settings, "support_phone", None),
        "here": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
    }


# Autoescaping is on for .html (Starlette's default), so user text never becomes markup.
templates = Jinja2Templates(directory=TEMPLATES_DIR, context_processors=[_page_globals])
templates.env.add_extension("jinja2.ext.i18n")
templates.env.install_gettext_callables(  # type: ignore[attr-defined]
    i18n.gettext, i18n.ngettext, newstyle=True
)
templates.env.filters.update(
    datetime=i18n.format_datetime,
    date=i18n.format_date,
    time=i18n.format_time,
    ago=i18n.format_ago,
    number=i18n.format_number,
)
templates.env.globals.update(
    build=build_info(),
    timezone_label=i18n.timezone_label,
    problem_words=registry_words.problem_words,
    change_words=registry_words.change_words,
    report_words=registry_words.report_words,
    page_error_words=page_error_words,
)
