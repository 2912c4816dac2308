"""Deterministic seed data: the same seed number and the same "now" give the same facilities.

Everything random comes from one ``random.Random(seed)``; nothing here touches the
global random generator. Contact data is obviously fake (``example.com``, ``+39 000 …``).
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from pmsgate.sandbox.kross.records import (
    Apartment,
    CheckInInstructions,
    Contract,
    Facility,
    FacilityKind,
    Guest,
    ManualSection,
    Payment,
    Picture,
    Reservation,
    ReservationStatus,
    Room,
)

# The shared key the gateway holds for "partner" facilities; a sandbox value, not a real key.
SANDBOX_PARTNER_API_KEY = "5a4d0c1e9b7f4e2a8c6d3b1f0e9a7c55"

FACILITY_COUNT = 4
DAYS_BEFORE_TODAY = 30
DAYS_AFTER_TODAY = 90
HISTORY_YEARS = 3

_FLOWERS = [
    "Rosa", "Giglio", "Lavanda", "Ulivo", "Girasole", "Orchidea", "Mimosa", "Gelsomino",
    "Camelia", "Magnolia", "Glicine", "Peonia", "Tulipano", "Viola", "Iris", "Dalia",
]  # fmt: skip
_FIRST_NAMES = ["Anna", "Marco", "Laura", "Luca", "Sofia", "Jonas", "Emma", "Pierre", "Lucia"]
_LAST_NAMES = ["Esempio", "Prova", "Sample", "Muster", "Dupont", "Test", "Demo", "Fittizio"]
_LANGS = ["it", "en", "de", "fr", "es", "nl"]
_CHANNELS = ["booking.com", "airbnb", "direct", "expedia", "vrbo"]
_NOTES = ["", "", "", "Late arrival, around 23:00", "Travelling with a small dog", "Baby cot"]
_NATIONALITIES = ["IT", "DE", "FR", "ES", "NL", "GB", "US"]
_DOCUMENT_TYPES = ["passport", "id_card", "driving_license"]
_CITIES = ["Sandboxville", "Testopoli", "Esempiano"]


@dataclass
class _Ids:
    """Running ids, unique across facilities like the real system's."""

    room_type: int = 10
    room: int = 100
    reservation: int = 1001
    payment: int = 1
    guest: int = 1
    picture: int = 1

    def next(self, kind: str) -> int:
        value: int = getattr(self, kind)
        setattr(self, kind, value + 1)
        return value


def build_facilities(seed: int, now: datetime, count: int = FACILITY_COUNT) -> list[Facility]:
    """``count`` sandbox facilities, derived only from ``seed``, ``now`` (UTC) and ``count``."""
    if count < 1:
        raise ValueError("the sandbox needs at least one facility")
    rng = random.Random(seed)
    ids = _Ids()
    facilities: list[Facility] = []
    hotel_ids = rng.sample(range(100000, 999999), count)
    for index, hotel_number in enumerate(hotel_ids):
        # Alternate the kinds so both are always present.
        kind: FacilityKind = "own" if index % 2 == 0 else "partner"
        apartments = [
            _apartment(rng, ids, name, index) for name in rng.sample(_FLOWERS, rng.randint(2, 6))
        ]
        facility = Facility(
            hotel_id=str(hotel_number),
            id_property=index + 1,
            name=f"Sandbox Residence {index + 1}",
            username=f"api{rng.randint(10000, 99999)}",
            password="".join(rng.choices(string.ascii_letters + string.digits, k=14)),
            kind=kind,
            api_key=f"{rng.getrandbits(128):032x}" if kind == "own" else None,
            apartments={a.id_room_type: a for a in apartments},
            reservations={},
        )
        for apartment in apartments:
            for room in apartment.rooms:
                for reservation in _reservations(rng, ids, facility, apartment, room, now):
                    facility.reservations[reservation.id_reservation] = reservation
        facilities.append(facility)
    return facilities


def _apartment(rng: random.Random, ids: _Ids, flower: str, facility_index: int) -> Apartment:
    name = f"Apartment {flower}"
    id_room_type = ids.next("room_type")
    rooms = [Room(ids.next("room"), f"{flower} {n}") for n in range(1, rng.randint(1, 2) + 1)]
    street_number = rng.randint(1, 120)
    city = _CITIES[facility_index % len(_CITIES)]
    address = f"Via degli Esempi {street_number}, 00000 {city} (XX)"
    wifi_network = f"Sandbox-{flower}"
    wifi_password = "".join(rng.choices(string.ascii_lowercase + string.digits, k=10))
    key_box = rng.randint(1000, 9999)
    return Apartment(
        id_room_type=id_room_type,
        name=name,
        rooms=rooms,
        max_guests=rng.randint(2, 6),
        price=float(rng.randrange(70, 230, 5)),
        min_stay=rng.choice([1, 1, 2, 3]),
        check_in=CheckInInstructions(
            address=address,
            check_in_from="15:00",
            check_in_until=rng.choice(["20:00", "22:00", "23:59"]),
            check_out_until=rng.choice(["10:00", "11:00"]),
            instructions=(
                f"The keys of {name} are in the key box next to the main door, "
                f"code {key_box}. The apartment is on floor {rng.randint(0, 4)}."
            ),
        ),
        house_manual=[
            ManualSection("WiFi", f"Network {wifi_network}, password {wifi_password}."),
            ManualSection("Check-in and check-out", "Check-in from 15:00, check-out by 10:00."),
            ManualSection(
                "How to reach the property",
                f"{address}. From the station take bus {rng.randint(1, 40)} to the stop Esempi.",
            ),
            ManualSection("House rules", "No smoking, no parties, quiet hours 22:00-08:00."),
            ManualSection(
                "Before departure",
                "Leave the keys in the key box, take out the rubbish, close the windows.",
            ),
        ],
        contract=Contract(
            title=f"Short-term rental contract - {name}",
            version=f"{rng.randint(2024, 2026)}.{rng.randint(1, 4)}",
            text=(
                f"The host lets {name} to the guest for the dates of the reservation. "
                "The guest respects the house rules and leaves the apartment as found."
            ),
        ),
    )


def _reservations(
    rng: random.Random,
    ids: _Ids,
    facility: Facility,
    apartment: Apartment,
    room: Room,
    now: datetime,
) -> list[Reservation]:
    # Walk one room's timeline; live reservations never overlap, cancelled ones may.
    today = now.date()
    cursor = today - timedelta(days=DAYS_BEFORE_TODAY - rng.randint(0, 3))
    last_arrival = today + timedelta(days=DAYS_AFTER_TODAY)
    result: list[Reservation] = []
    while cursor <= last_arrival:
        nights = rng.choice([1, 2, 2, 3, 3, 4, 5, 7])
        arrival, departure = cursor, cursor + timedelta(days=nights)
        cancelled = rng.random() < 0.08
        status = "CANC" if cancelled else _status_for(rng, arrival, departure, today)
        result.append(
            _reservation(rng, ids, facility, apartment, room, arrival, nights, status, now)
        )
        gap = rng.randint(1, 3) if cancelled else rng.choice([0, 0, 1, 2, 3, 4])
        cursor = (arrival if cancelled else departure) + timedelta(days=gap)
    return result


def _status_for(
    rng: random.Random, arrival: date, departure: date, today: date
) -> ReservationStatus:
    if departure <= today:
        return "CHOUT"
    if arrival < today:
        return "CHIN"
    # Arriving today or later: not checked in yet.
    return "PEND" if rng.random() < 0.15 else "CONF"


def _reservation(
    rng: random.Random,
    ids: _Ids,
    facility: Facility,
    apartment: Apartment,
    room: Room,
    arrival: date,
    nights: int,
    status: ReservationStatus,
    now: datetime,
) -> Reservation:
    today = now.date()
    id_reservation = ids.next("reservation")
    booked_on = min(arrival - timedelta(days=rng.randint(1, 120)), today - timedelta(days=1))
    booked_at = datetime.combine(booked_on, time(rng.randint(0, 23), rng.randint(0, 59)))
    total = round(apartment.price * nights, 2)
    reservation = Reservation(
        id_reservation=id_reservation,
        label=f"R-{id_reservation}",
        id_room=room.id_room,
        id_room_type=apartment.id_room_type,
        arrival=arrival,
        departure=arrival + timedelta(days=nights),
        status=status,
        lang=rng.choice(_LANGS),
        note=rng.choice(_NOTES),
        channel=rng.choice(_CHANNELS),
        confirmation_code=f"{rng.randint(10**9, 10**10 - 1)}",
        email=f"guest{id_reservation}@example.com",
        phone=f"+39 000 {rng.randint(0, 9999999):07d}",
        date_reservation=booked_at,
        total_amount=total,
        currency="EUR",
        qt_guests=rng.randint(1, apartment.max_guests),
        portal_link=(
            f"https://guest-portal.example.com/{facility.hotel_id}/"
            f"{id_reservation}-{rng.getrandbits(32):08x}"
        ),
    )
    _add_payments(rng, ids, reservation, booked_on)
    _add_check_in(rng, ids, reservation, today)
    return reservation


def _add_payments(rng: random.Random, ids: _Ids, res: Reservation, booked_on: date) -> None:
    if res.status in ("CANC", "PEND"):
        return
    deposit = round(res.total_amount * 0.3, 2)
    if res.status == "CONF" and rng.random() < 0.4:
        return
    res.payments.append(_payment(ids, res, deposit, "card", booked_on, "Deposit"))
    if res.status in ("CHIN", "CHOUT"):
        balance = round(res.total_amount - deposit, 2)
        res.payments.append(
            _payment(ids, res, balance, rng.choice(["card", "cash"]), res.arrival, "Balance")
        )


def _payment(
    ids: _Ids, res: Reservation, amount: float, method: str, when: date, note: str
) -> Payment:
    return Payment(ids.next("payment"), res.id_reservation, amount, "EUR", method, when, note)


def _add_check_in(rng: random.Random, ids: _Ids, res: Reservation, today: date) -> None:
    # Portals fill up as arrival approaches; some in-house guests never finish theirs.
    if res.status == "CANC":
        return
    if res.status == "CHOUT" or (res.status == "CHIN" and rng.random() < 0.75):
        registered, with_pictures = res.qt_guests, True
    elif res.status == "CHIN":
        registered, with_pictures = rng.randint(0, res.qt_guests - 1), rng.random() < 0.5
    elif res.arrival <= today + timedelta(days=7):
        registered = rng.randint(0, res.qt_guests)
        with_pictures = registered > 0 and rng.random() < 0.5
    else:
        registered = res.qt_guests if rng.random() < 0.15 else 0
        with_pictures = registered > 0
    for _ in range(registered):
        res.guests.append(
            Guest(
                id_guest=ids.next("guest"),
                first_name=rng.choice(_FIRST_NAMES),
                last_name=rng.choice(_LAST_NAMES),
                birth_date=date(rng.randint(1950, 2010), rng.randint(1, 12), rng.randint(1, 28)),
                nationality=rng.choice(_NATIONALITIES),
                document_type=rng.choice(_DOCUMENT_TYPES),
                document_number=f"X{rng.randint(0, 9999999):07d}",
            )
        )
    if with_pictures:
        for guest in res.guests:
            res.pictures.append(
                Picture(
                    id_picture=ids.next("picture"),
                    id_guest=guest.id_guest,
                    filename=f"document-{guest.id_guest}.jpg",
                    content_type="image/jpeg",
                    size=rng.randint(80_000, 2_000_000),
                )
            )


def build_history(
    seed: str, facility: Facility, count: int, now: datetime, first_ids: dict[str, int]
) -> tuple[list[Reservation], dict[str, int]]:
    """``count`` past stays before the facility's earliest ones, and the next free ids after them.

    Rooms take turns, each walking back from its earliest reservation with gaps wide enough
    that the stays cover about HISTORY_YEARS (more when they do not fit), never sharing a room
    night; every stay is checked out or cancelled and was booked before its arrival. The same
    ``seed`` gives the same stays.
    """
    rng = random.Random(seed)
    ids = _Ids(**first_ids)
    today = now.date()
    slots = [
        (apartment, room)
        for apartment in sorted(facility.apartments.values(), key=lambda a: a.id_room_type)
        for room in apartment.rooms
    ]
    cursors = {
        room.id_room: min(
            (r.arrival for r in facility.reservations.values() if r.id_room == room.id_room),
            default=today,
        )
        for _, room in slots
    }
    # A stay plus its gap takes about 5.5 days when rooms are busy; few stays per room get
    # wider gaps, so a small history is spread out as well instead of filling the last month.
    per_room = -(-count // len(slots))
    mean_gap = max(0, HISTORY_YEARS * 365 // per_room - 4)
    history: list[Reservation] = []
    for index in range(count):
        apartment, room = slots[index % len(slots)]
        nights = rng.choice([1, 2, 2, 3, 3, 4, 5, 7])
        gap = rng.randint(0, 2 * mean_gap) if mean_gap else rng.choice([0, 0, 1, 2, 3, 4])
        departure = cursors[room.id_room] - timedelta(days=gap)
        arrival = departure - timedelta(days=nights)
        status: ReservationStatus = "CANC" if rng.random() < 0.08 else "CHOUT"
        history.append(
            _reservation(rng, ids, facility, apartment, room, arrival, nights, status, now)
        )
        cursors[room.id_room] = arrival
    return history, {kind: getattr(ids, kind) for kind in first_ids}


def next_ids(facilities: list[Facility]) -> dict[str, int]:
    """The first free id of each kind, so that records added later never collide."""
    reservations = [r for f in facilities for r in f.reservations.values()]
    return {
        "reservation": 1 + max((r.id_reservation for r in reservations), default=1000),
        "payment": 1 + max((p.id_payment for r in reservations for p in r.payments), default=0),
        "guest": 1 + max((g.id_guest for r in reservations for g in r.guests), default=0),
        "picture": 1 + max((p.id_picture for r in reservations for p in r.pictures), default=0),
    }
