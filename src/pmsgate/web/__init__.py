"""The web application: accounts and sessions, the customer and admin API, the console.

- :mod:`pmsgate.web.context` — :class:`WebServices`, everything the web app runs on.
- :mod:`pmsgate.web.users` / :mod:`pmsgate.web.auth` — accounts (argon2), signed session
  cookies, CSRF, login throttling, and the FastAPI dependencies that check them.
- :mod:`pmsgate.web.api` — ``POST /api/{assistant}/sync-knowledge``,
  ``PUT /api/admin/kross/connect`` and their companions (JSON).
- :mod:`pmsgate.web.login` — signing in and out, one-time links, "forgot your password".
- :mod:`pmsgate.web.console` — the server-rendered console (Jinja2 + htmx), with
  :mod:`pmsgate.web.charts` drawing its SVG charts; the other ``*_console`` routers add
  the admin's, the incidents', the registry's and the call log's pages. Routers import
  none of each other: what pages share is :mod:`pmsgate.web.pages` (rendering, the one
  error handler, the sign-in redirect), :mod:`pmsgate.web.customer_pages` and
  :mod:`pmsgate.web.admin_pages`.

See docs/web.md.
"""
