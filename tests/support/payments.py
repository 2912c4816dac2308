"""A payment the booking-system emulator accepts: on a confirmed reservation yet to arrive."""

from __future__ import annotations

from datetime import date
from typing import Any

from pmsgate.sandbox.kross.records import Reservation
from pmsgate.sandbox.kross.store import KrossStore

PAYMENT = "reservations/add-payment"


def future_confirmed(store: KrossStore, hotel_id: str, today: date) -> Reservation:
    """A confirmed reservation of ``hotel_id`` arriving after ``today``."""
    return next(
        r
        for r in store.facility(hotel_id).reservations.values()
        if r.arrival > today and r.status == "CONF"
    )


def payment_body(store: KrossStore, hotel_id: str, today: date, amount: int) -> dict[str, Any]:
    """The body of a card payment of ``amount`` EUR on :func:`future_confirmed`'s reservation."""
    return {
        "id_reservation": future_confirmed(store, hotel_id, today).id_reservation,
        "amount": amount,
        "currency": "EUR",
        "method": "card",
    }
