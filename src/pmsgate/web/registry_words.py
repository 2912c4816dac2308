"""The apartment registry in a property operator's words (the customer's registry panel).

A registry check (:mod:`pmsgate.customers.registry_check`) stores each problem with the
platform team's sentences: room-type numbers, listing labels, the runbook's verbs. A
customer reads the same facts — the problem's kind, the apartment's name, the listing it
should use — in whole sentences of their language, by apartment name, never a number.
The admin's panel keeps the stored sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

from pmsgate.customers.registry_check import (
    ProblemKind,
    RegistryChange,
    RegistryProblem,
    RegistryReport,
)
from pmsgate.i18n import N_, gettext


@dataclass(frozen=True)
class ProblemWords:
    """One problem for the customer: what is wrong, and what happens next."""

    reason: str
    fix: str


def _listing(name: str | None) -> str:
    return f"“{name.strip()}”" if name and name.strip() else gettext("its own listing")


# What is wrong, by the problem's kind ({apartment}: the apartment's or the listing's name);
# a listing without an apartment is told last.
_REASONS = {
    ProblemKind.NOT_MAPPED: N_(
        "{apartment} is not connected to its listing yet: guests asking about it are told "
        "“Listing unavailable”."
    ),
    ProblemKind.MISSING_LISTING: N_(
        "Your assistant has no listing for {apartment} yet: guests asking about it are "
        "told “Listing unavailable”."
    ),
    ProblemKind.LISTING_DELETED: N_(
        "The listing {apartment} was connected to no longer exists: guests asking about "
        "it are told “Listing unavailable”."
    ),
    ProblemKind.ROOM_TYPE_MISMATCH: N_(
        "{apartment} is connected to the listing of another apartment: guests may get "
        "the other apartment's details."
    ),
    ProblemKind.AMBIGUOUS_LISTING: N_(
        "More than one listing could belong to {apartment}: which one is right needs a person."
    ),
}
_UNCLAIMED_LISTING = N_(
    "The listing “{apartment}” belongs to none of your apartments, so what your "
    "notes say is never loaded into it."
)


def problem_words(problem: RegistryProblem) -> ProblemWords:
    """What is wrong with one apartment (or listing), and how it gets fixed."""
    kind = problem.kind
    reason = gettext(_REASONS.get(kind, _UNCLAIMED_LISTING))
    if problem.fixable:
        fix = (
            gettext("The “Fix automatically” button below adds its apartment.")
            if kind not in _REASONS
            else gettext(
                "The “Fix automatically” button below connects it to the listing {listing}."
            ).format(listing=_listing(problem.target_listing_name))
        )
    elif kind is ProblemKind.MISSING_LISTING:
        fix = gettext(
            "Check that the apartment is active in your booking system: its listing appears "
            "within a few hours. If it was closed for good, tell us."
        )
    else:
        fix = gettext("Our team has been told and will fix it with you.")
    return ProblemWords(reason.format(apartment=problem.apartment), fix)


def change_words(change: RegistryChange) -> str:
    """One change the automatic fix made, as a sentence."""
    if change.action == "detach":
        sentence = gettext("{apartment} no longer uses another apartment's listing.")
    elif change.action == "create":
        sentence = gettext("{apartment} was added, with its own listing.")
    else:  # attach, replace
        sentence = gettext("{apartment} is now connected to its own listing.")
    return sentence.format(apartment=change.apartment)


def report_words(report: RegistryReport) -> str:
    """Why a check found nothing to list (it could not check, or it is not needed)."""
    if report.status == "not_applicable":
        return gettext(
            "Not needed: your assistant reads your booking system directly, without a "
            "listing per apartment."
        )
    return gettext(
        "Your assistant's listings could not be read, so no apartment could be checked. "
        "This usually means the booking system needs reconnecting; we check again "
        "automatically."
    )
