"""What a person reads on a page when something went wrong, in plain words and their language.

The service's errors carry an English ``message`` and ``hint`` written for the API's
callers (they may name a header, a setting or a command). A page — the sign-in page, the
one-time link pages, the error page — shows instead what :func:`page_error_words` says
for the error's ``code``: a sentence and, when there is one, what to do next, translated
through the catalogue (:mod:`pmsgate.i18n`). A code it does not know gets a sentence for
its status (``That could not be done.`` for a 4xx, ``Something went wrong on our side.``
for a 5xx): never the internal English message.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pmsgate.errors import PmsgateError
from pmsgate.i18n import N_, gettext, ngettext
from pmsgate.web.users import MAX_PASSWORD, MIN_PASSWORD

Words = tuple[str, str | None]

# What the page says for each code that needs no detail of the error: (message, hint).
_WORDS: dict[str, Words] = {
    "invalid_credentials": (
        N_("The e-mail address or the password is wrong."),
        N_(
            "Check both and sign in again. After several wrong tries, signing in is paused "
            "for a few minutes."
        ),
    ),
    "shared_state_unavailable": (
        N_("Our service is having a short problem."),
        N_("Wait a few seconds and try again."),
    ),
    "not_authenticated": (
        N_("You are not signed in, or your session has ended."),
        N_("Sign in again to continue."),
    ),
    "unauthorized": (
        N_("You are not signed in, or your session has ended."),
        N_("Sign in again to continue."),
    ),
    "forbidden": (
        N_("Your account cannot open this page."),
        N_("If you think it should, sign in with the right account or write to us."),
    ),
    "customer_not_found": (
        N_("We could not find this account."),
        N_("Check the address of the page, or go back to your page."),
    ),
    "csrf_failed": (
        N_("This page was out of date, so nothing was sent."),
        N_("Reload the page and try again."),
    ),
    # A one-time form token (pmsgate.web.form_tokens) that is not this page's, or too old.
    "form_token_invalid": (
        N_("This page was out of date, so nothing was sent."),
        N_("Reload the page and try again."),
    ),
    "form_expired": (
        N_("This page was open for too long, so nothing was sent."),
        N_("Reload the page and try again."),
    ),
    "not_found": (
        N_("This page does not exist."),
        N_("Check the address of the page, or go back to your page."),
    ),
    "passwords_differ": (
        N_("The two passwords are not the same."),
        N_("Type the same password in both fields."),
    ),
    "invalid_email": (
        N_("This e-mail address does not look right."),
        N_("Write it as name@example.com."),
    ),
}

# A one-time link that cannot be used, by why (the error's ``state``).
_LINK_WORDS: dict[str, str] = {
    "used": N_("This link has already been used."),
    "expired": N_("This link has expired."),
    "unknown": N_("This link is not valid."),
}
_LINK_HINT = N_(
    "Each link works only once. Sign in with your e-mail address and password; if you have "
    "no password yet or forgot it, ask for a new link on the sign-in page."
)

# Any other error, by its status.
_NOT_ALLOWED: Words = (
    N_("Your account cannot open this page."),
    N_("If you think it should, sign in with the right account or write to us."),
)
_TOO_MANY: Words = (
    N_("Too many tries in a short time."),
    N_("Wait a minute and try again."),
)
_CLIENT_FALLBACK: Words = (
    N_("That could not be done."),
    N_("Go back and try again; if it happens again, write to us."),
)
_SERVER_FALLBACK: Words = (
    N_("Something went wrong on our side."),
    N_("Try again in a few minutes; if it keeps happening, write to us."),
)


def _translated(words: tuple[str, str | None]) -> Words:
    message, hint = words
    return gettext(message), gettext(hint) if hint is not None else None


_SLACK_S = 2


def _minutes(seconds: object) -> int:
    """Whole minutes to wait, at least one (``retry_after_s`` may be missing or odd).

    Rounded up, but a window that ends a second or two after a whole minute reads as that
    minute (a 15-minute pause is "15 minutes", not 16: the wait counts from the failure).
    """
    if not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return 1
    return max(1, math.ceil((seconds - _SLACK_S) / 60))


def _too_many_sign_ins(error: PmsgateError) -> Words:
    minutes = _minutes(getattr(error, "retry_after_s", None))
    return (
        gettext("Too many wrong sign-ins: signing in is paused for a while."),
        ngettext(
            "Try again in {count} minute, or choose a new password with “Forgot your password?”.",
            "Try again in {count} minutes, or choose a new password with “Forgot your password?”.",
            minutes,
        ).format(count=minutes),
    )


def _link_refused(error: PmsgateError) -> Words:
    state = str(getattr(error, "state", "unknown"))
    return gettext(_LINK_WORDS.get(state, _LINK_WORDS["unknown"])), gettext(_LINK_HINT)


def _password_too_short(_error: PmsgateError) -> Words:
    return (
        ngettext(
            "The password is shorter than {count} character.",
            "The password is shorter than {count} characters.",
            MIN_PASSWORD,
        ).format(count=MIN_PASSWORD),
        ngettext(
            "Choose a password of at least {count} character: a short sentence works well.",
            "Choose a password of at least {count} characters: a short sentence works well.",
            MIN_PASSWORD,
        ).format(count=MIN_PASSWORD),
    )


def _password_too_long(_error: PmsgateError) -> Words:
    return (
        ngettext(
            "The password is longer than {count} character.",
            "The password is longer than {count} characters.",
            MAX_PASSWORD,
        ).format(count=MAX_PASSWORD),
        ngettext(
            "Choose a password of at most {count} character.",
            "Choose a password of at most {count} characters.",
            MAX_PASSWORD,
        ).format(count=MAX_PASSWORD),
    )


# Codes whose words depend on the error's details.
_DETAILED: dict[str, Callable[[PmsgateError], Words]] = {
    "too_many_login_attempts": _too_many_sign_ins,
    "login_link_invalid": _link_refused,
    "password_too_short": _password_too_short,
    "password_too_long": _password_too_long,
}


def page_error_words(error: PmsgateError) -> Words:
    """The message and the hint (or None) a person reads on a page for ``error``.

    Translated into the reader's language; never the error's internal English message,
    a code, a header or a command.
    """
    detailed = _DETAILED.get(error.code)
    if detailed is not None:
        return detailed(error)
    words = _WORDS.get(error.code)
    if words is not None:
        return _translated(words)
    status = error.status
    if status in (401, 419):
        return _translated(_WORDS["not_authenticated"])
    if status == 403:
        return _translated(_NOT_ALLOWED)
    if status in (404, 410):
        return _translated(_WORDS["not_found"])
    if status == 429:
        return _translated(_TOO_MANY)
    if 400 <= status < 500:
        return _translated(_CLIENT_FALLBACK)
    return _translated(_SERVER_FALLBACK)
