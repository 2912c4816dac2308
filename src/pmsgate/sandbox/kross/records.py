"""The emulator's records: facilities, apartments, reservations and what hangs off them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal

FacilityKind = Literal["own", "partner"]
ReservationStatus = Literal["CONF", "PEND", "CANC", "CHIN", "CHOUT"]
PortalStatus = Literal["not_started", "incomplete", "complete"]


@dataclass
class Room:
    """A physical unit of an apartment (room type); reservations are placed on rooms."""

    id_room: int
    name: str


@dataclass
class CheckInInstructions:
    """What a guest needs to get in."""

    address: str
    check_in_from: str
    check_in_until: str
    check_out_until: str
    instructions: str


@dataclass
class ManualSection:
    """One section of an apartment's house manual."""

    title: str
    body: str


@dataclass
class Contract:
    """The rental contract of an apartment."""

    title: str
    version: str
    text: str


@dataclass
class Apartment:
    """A room type ("Apartment Rosa") with its rooms, price and guest documents."""

    id_room_type: int
    name: str
    rooms: list[Room]
    max_guests: int
    price: float
    min_stay: int
    check_in: CheckInInstructions
    house_manual: list[ManualSection]
    contract: Contract


@dataclass
class Payment:
    """A payment recorded on a reservation."""

    id_payment: int
    id_reservation: int
    amount: float
    currency: str
    method: str
    date: date
    note: str


@dataclass(frozen=True)
class NewGuest:
    """A guest to register."""

    first_name: str
    last_name: str
    birth_date: date
    nationality: str
    document_type: str
    document_number: str


@dataclass(frozen=True)
class Guest(NewGuest):
    """A guest registered through check-in: a new guest and the id it was given."""

    id_guest: int


@dataclass
class Picture:
    """A stored guest picture (metadata only: the bytes are not needed by anyone)."""

    id_picture: int
    id_guest: int | None
    filename: str
    content_type: str
    size: int


@dataclass(frozen=True)
class GuestPortal:
    """The guest check-in portal block, derived from the reservation's guests and pictures."""

    link: str
    status: PortalStatus
    guests_registered: int
    guests_expected: int
    missing: tuple[str, ...]


@dataclass
class Reservation:
    """A booking of one room for the nights ``arrival`` … ``departure - 1``."""

    id_reservation: int
    label: str
    id_room: int
    id_room_type: int
    arrival: date
    departure: date
    status: ReservationStatus
    lang: str
    note: str
    channel: str
    confirmation_code: str
    email: str
    phone: str
    date_reservation: datetime
    total_amount: float
    currency: str
    qt_guests: int
    portal_link: str
    payments: list[Payment] = field(default_factory=list)
    guests: list[Guest] = field(default_factory=list)
    pictures: list[Picture] = field(default_factory=list)

    @property
    def holds_room(self) -> bool:
        """Whether the reservation keeps its room busy (cancelled ones do not)."""
        return self.status != "CANC"

    def overlaps(self, arrival: date, departure: date) -> bool:
        """Whether any night of ``arrival``…``departure`` is one of this reservation's nights."""
        return self.arrival < departure and arrival < self.departure

    def portal(self) -> GuestPortal:
        """The guest_portal block as it stands now."""
        missing: list[str] = []
        if len(self.guests) < self.qt_guests:
            missing.append("guest_documents")
        if not self.pictures:
            missing.append("guest_pictures")
        status: PortalStatus
        if not missing:
            status = "complete"
        elif not self.guests and not self.pictures:
            status = "not_started"
        else:
            status = "incomplete"
        return GuestPortal(
            link=self.portal_link,
            status=status,
            guests_registered=len(self.guests),
            guests_expected=self.qt_guests,
            missing=tuple(missing),
        )


@dataclass
class Facility:
    """A facility (hotel_id): its API credentials, apartments and reservations."""

    hotel_id: str
    id_property: int
    name: str
    username: str
    password: str
    kind: FacilityKind
    # Only "own" facilities have a key of their own; partners authenticate with the shared one.
    api_key: str | None
    apartments: dict[int, Apartment]
    reservations: dict[int, Reservation]
