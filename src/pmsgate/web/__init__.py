"""The web application: accounts and sessions, the customer and admin API, the console.

- :mod:`pmsgate.web.context` — :class:`WebServices`, everything the web app runs on.
- :mod:`pmsgate.web.users` / :mod:`pmsgate.web.auth` — accounts (argon2), signed session
  cookies, CSRF, login throttling, and the FastAPI dependencies that check them.
- :mod:`pmsgate.web.api` — ``POST /api/{assistant}/sync-knowledge``,
  ``PUT /api/admin/kross/connect`` and their companions (JSON).
- :mod:`pmsgate.web.console` — the server-rendered console (Jinja2 + htmx), with
  :mod:`pmsgate.web.charts` drawing its SVG charts.

See docs/web.md.
"""
