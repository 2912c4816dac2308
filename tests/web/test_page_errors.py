"""A paused sign-in tells the wait in whole minutes as a person counts them."""

from __future__ import annotations

import pytest

from pmsgate import i18n
from pmsgate.web.page_errors import page_error_words
from pmsgate.web.users import TooManyLoginAttempts


@pytest.mark.parametrize(
    ("wait_s", "minutes"),
    [(900.001, "15 minutes"), (901.5, "15 minutes"), (903, "16 minutes"), (61, "1 minute")],
)
def test_the_wait_is_said_in_the_minutes_a_person_expects(wait_s: float, minutes: str) -> None:
    with i18n.use_locale("en"):
        _, hint = page_error_words(TooManyLoginAttempts(wait_s))
    assert hint is not None and minutes in hint, hint
