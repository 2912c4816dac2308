"""Deterministic seed data of the notes emulator, consistent with the booking-system emulator.

One notes workspace (one integration token) per booking-system facility, i.e. per
customer; one "Apartments" database per workspace whose pages are the facility's
apartments (title = apartment name, number property ``PMS room type id`` = the
booking-system room type). Each page holds 30-40 toggles of house information in
Italian and/or English, and the quirks the knowledge bridge must survive (docs/knowledge-sync.md):

* a share of pages lacks one or two of the five canonical sections;
* on some pages the FIRST toggle is a welcome toggle whose children mention wifi;
* WiFi toggles whose callouts say "wifi" or "internet";
* WiFi toggle titles that do not contain the network and the password yet;
* stray mentions of wifi/internet in the bodies of other toggles;
* a canonical section written as a ``heading_2`` plus paragraphs instead of a toggle;
* a toggle with more than 100 children (children pagination).

Every quirk is present at least once whatever the seed, and one page is always clean.
Blocks are produced in the request shape of ``PATCH /v1/blocks/{id}/children``
(nested ``children`` inside the type object); the store materialises them. All
randomness comes from one ``random.Random(seed)``; contact data is fake.
"""

from __future__ import annotations

import random
import re
import string
import uuid
from copy import copy
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, Literal

from pmsgate.sandbox.kross.records import Apartment, Facility

Language = Literal["it", "en", "bi"]
SectionKind = Literal["toggle", "heading_2"]

CANONICAL_SECTIONS: tuple[str, ...] = (
    "wifi",
    "check_in_out",
    "how_to_reach",
    "house_rules",
    "before_departure",
)
ROOM_TYPE_PROPERTY = "PMS room type id"
TITLE_PROPERTY = "Name"
ADDRESS_PROPERTY = "Address"
# Properties people keep next to pmsgate's: a listing id (pmsgate's client reads it), the page's
# editorial state, whether it is published to guests, and when it was last reviewed.
LISTING_PROPERTY = "Listing id"
STATUS_PROPERTY = "Status"
PUBLISHED_PROPERTY = "Published"
REVIEWED_PROPERTY = "Last reviewed"
STATUS_OPTIONS: tuple[dict[str, str], ...] = (
    {"id": "opt1", "name": "Ready", "color": "green"},
    {"id": "opt2", "name": "Draft", "color": "gray"},
    {"id": "opt3", "name": "Needs review", "color": "yellow"},
)
DATABASE_TITLE = "Apartments"
MIN_TOGGLES, MAX_TOGGLES = 30, 40

# Section titles as people write them, per language; "bi" pages use "Italiano / English".
SECTION_TITLES: dict[str, dict[str, tuple[str, ...]]] = {
    "wifi": {
        "it": ("WiFi", "Wi-Fi e Internet", "Connessione WiFi", "Internet e WiFi"),
        "en": ("WiFi", "Wi-Fi & Internet", "Internet access"),
        "bi": ("WiFi / Internet", "Wi-Fi e Internet / Wi-Fi & Internet"),
    },
    "check_in_out": {
        "it": ("Check-in / Check-out", "Orari di check-in e check-out", "Arrivo e partenza"),
        "en": ("Check-in / Check-out", "Check-in and check-out times", "Arrival and departure"),
        "bi": ("Orari di check-in e check-out / Check-in and check-out times",),
    },
    "how_to_reach": {
        "it": ("Come raggiungerci", "Come arrivare", "Indicazioni stradali"),
        "en": ("How to get here", "Getting here", "Directions"),
        "bi": ("Come raggiungerci / How to get here", "Come arrivare / Getting here"),
    },
    "house_rules": {
        "it": ("Regole della casa", "Regolamento della casa"),
        "en": ("House rules", "Rules of the house"),
        "bi": ("Regole della casa / House rules",),
    },
    "before_departure": {
        "it": ("Prima della partenza", "Prima di partire"),
        "en": ("Before you leave", "Before departure"),
        "bi": ("Prima della partenza / Before you leave",),
    },
}

# Shares of pages with each quirk (each is also present at least once).
_SHARE_MISSING = 0.3
_SHARE_FIRST_TOGGLE_WIFI = 0.25
_SHARE_WIFI_CALLOUT_WORDS = 0.4
_SHARE_WIFI_TITLE_INCOMPLETE = 0.6
_SHARE_STRAY_MENTIONS = 0.3
_SHARE_HEADING_SECTION = 0.1
_SHARE_LONG_TOGGLE = 0.15

_WIFI_IN_MANUAL = re.compile(r"Network (?P<network>\S+), password (?P<password>[^\s.]+)")


@dataclass(frozen=True)
class PageTruth:
    """What a page is known to contain: the ground truth tests compare a checker with."""

    page_id: str
    title: str
    pms_room_type_id: int
    language: Language
    sections_present: tuple[str, ...]
    sections_missing: tuple[str, ...]
    section_titles: dict[str, str]
    section_kinds: dict[str, SectionKind]
    wifi_network: str
    wifi_password: str
    wifi_title_complete: bool
    wifi_callout_words: bool
    first_toggle_mentions_wifi: bool
    stray_wifi_mentions: bool
    long_toggle: bool
    toggle_count: int

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view: the fields in order, the Wi-Fi pair as ``wifi``, ``wifi_on_page``."""
        view: dict[str, Any] = {}
        for name, value in ((f.name, getattr(self, f.name)) for f in fields(self)):
            if name == "wifi_network":
                view["wifi"] = {"network": self.wifi_network, "password": self.wifi_password}
                view["wifi_on_page"] = "wifi" in self.sections_present
            elif name != "wifi_password":
                view[name] = list(value) if isinstance(value, tuple) else copy(value)
        return view


@dataclass
class PageSeed:
    """One apartment page: its properties and its blocks in request shape."""

    id: str
    title: str
    room_type_id: int
    address: str
    created_time: datetime
    blocks: list[dict[str, Any]]
    truth: PageTruth


@dataclass
class WorkspaceFacts:
    """What a notes workspace is from its seed on: ids, integration token, its database."""

    id: str
    name: str
    hotel_id: str
    token: str
    bot_id: str
    database_id: str
    data_source_id: str
    created_time: datetime

    def facts(self) -> dict[str, Any]:
        """These fields by name (to build a workspace of another kind from them)."""
        return {f.name: getattr(self, f.name) for f in fields(WorkspaceFacts)}


@dataclass
class WorkspaceSeed(WorkspaceFacts):
    """One customer's notes workspace: integration token, apartments database, pages."""

    pages: list[PageSeed] = field(default_factory=list)


@dataclass(frozen=True)
class _Quirks:
    missing: tuple[str, ...] = ()
    first_toggle_wifi: bool = False
    wifi_callout_words: bool = False
    wifi_title_incomplete: bool = False
    stray_mentions: bool = False
    heading_section: bool = False
    long_toggle: bool = False


def new_id(rng: random.Random) -> str:
    """A UUID (version 4 shape, with dashes) drawn from ``rng``."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def build_workspaces(seed: int, now: datetime, facilities: list[Facility]) -> list[WorkspaceSeed]:
    """One workspace per facility, derived only from ``seed``, ``now`` and the facilities."""
    rng = random.Random(seed)
    pairs = [(f, a) for f in facilities for a in f.apartments.values()]
    quirks = _assign_quirks(rng, len(pairs))
    workspaces: list[WorkspaceSeed] = []
    index = 0
    for facility in facilities:
        created = _minute(now - timedelta(days=rng.randint(400, 900)))
        workspace = WorkspaceSeed(
            id=new_id(rng),
            name=f"{facility.name} - Manuale della casa",
            hotel_id=facility.hotel_id,
            token="ntn_" + "".join(rng.choices(string.ascii_letters + string.digits, k=46)),
            bot_id=new_id(rng),
            database_id=new_id(rng),
            data_source_id=new_id(rng),
            created_time=created,
        )
        for apartment in facility.apartments.values():
            workspace.pages.append(_page(rng, apartment, quirks[index], now))
            index += 1
        workspaces.append(workspace)
    return workspaces


def _assign_quirks(rng: random.Random, count: int) -> list[_Quirks]:
    # Decided for all pages at once, so every quirk appears whatever the seed and page count.
    if count == 0:
        return []
    clean = rng.randrange(count)
    others = [i for i in range(count) if i != clean]

    def pick(pool: list[int], share: float) -> set[int]:
        if not pool:
            return set()
        return set(rng.sample(pool, min(len(pool), max(1, round(share * count)))))

    missing_pages = pick(others, _SHARE_MISSING)
    missing: dict[int, tuple[str, ...]] = {}
    for n, i in enumerate(sorted(missing_pages)):
        chosen = set(rng.sample(CANONICAL_SECTIONS, rng.choice([1, 1, 2])))
        if n == 0:
            # A page without WiFi is the case the knowledge bridge must never let through.
            chosen.add("wifi")
        missing[i] = tuple(s for s in CANONICAL_SECTIONS if s in chosen)
    with_wifi = [i for i in others if "wifi" not in missing.get(i, ())]
    callout_words = pick(with_wifi, _SHARE_WIFI_CALLOUT_WORDS)
    title_incomplete = pick(with_wifi, _SHARE_WIFI_TITLE_INCOMPLETE)
    first_toggle = pick(others, _SHARE_FIRST_TOGGLE_WIFI)
    stray = pick(others, _SHARE_STRAY_MENTIONS)
    # A heading section needs a present canonical section other than WiFi.
    heading_pool = [i for i in others if len(missing.get(i, ())) < 4]
    heading = pick(heading_pool, _SHARE_HEADING_SECTION)
    long_toggle = pick(list(range(count)), _SHARE_LONG_TOGGLE)
    return [
        _Quirks(
            missing=missing.get(i, ()),
            first_toggle_wifi=i in first_toggle,
            wifi_callout_words=i in callout_words,
            wifi_title_incomplete=i in title_incomplete,
            stray_mentions=i in stray,
            heading_section=i in heading,
            long_toggle=i in long_toggle,
        )
        for i in range(count)
    ]


# --- one page -------------------------------------------------------------------------------


def _page(rng: random.Random, apartment: Apartment, quirks: _Quirks, now: datetime) -> PageSeed:
    page_id = new_id(rng)
    lang: Language = rng.choice(["it", "it", "en", "bi", "bi"])
    network, password = _wifi_of(rng, apartment)
    present = [s for s in CANONICAL_SECTIONS if s not in quirks.missing]
    heading_key: str | None = None
    if quirks.heading_section:
        heading_key = rng.choice([s for s in present if s != "wifi"])

    sections: dict[str, list[dict[str, Any]]] = {}
    titles: dict[str, str] = {}
    kinds: dict[str, SectionKind] = {}
    for key in present:
        if key == "wifi":
            title = (
                rng.choice(SECTION_TITLES["wifi"][lang])
                if quirks.wifi_title_incomplete
                else _wifi_title(lang, network, password)
            )
            body = _wifi_body(rng, lang, network, password, quirks.wifi_callout_words)
        else:
            title = rng.choice(SECTION_TITLES[key][lang])
            body = _SECTION_BODIES[key](rng, lang, apartment)
        titles[key] = title
        if key == heading_key:
            kinds[key] = "heading_2"
            sections[key] = [_heading(2, title), *body]
        else:
            kinds[key] = "toggle"
            sections[key] = [_toggle(title, body)]

    toggle_target = rng.randint(MIN_TOGGLES, MAX_TOGGLES)
    # Sections written as a heading keep their inner toggles at the top level: count them too.
    section_toggles = sum(1 for unit in sections.values() for b in unit if b["type"] == "toggle")
    welcome = quirks.first_toggle_wifi or rng.random() < 0.5
    fixed = section_toggles + int(welcome) + int(quirks.long_toggle)
    others = _other_toggles(rng, lang, toggle_target - fixed, quirks.stray_mentions)
    if quirks.long_toggle:
        others.insert(rng.randrange(len(others) + 1), _long_toggle(rng, lang))

    # Canonical sections go among the other toggles, in an order of their own.
    units: list[list[dict[str, Any]]] = [[t] for t in others]
    for key in present:
        units.insert(rng.randrange(len(units) + 1), sections[key])
    if welcome:
        units.insert(0, [_welcome_toggle(lang, quirks.first_toggle_wifi)])
    blocks = _page_header(rng, lang, apartment)
    groups = _GROUP_HEADINGS[:]
    for position, unit in enumerate(units):
        # A few group headings break the list, never before the first toggle.
        if position and groups and position % 12 == 0:
            blocks.append(_heading(2, _title(lang, *groups.pop(0))))
        blocks.extend(unit)
    toggles = sum(1 for b in blocks if b["type"] == "toggle")
    created = _minute(now - timedelta(days=rng.randint(30, 400)))
    truth = PageTruth(
        page_id=page_id,
        title=apartment.name,
        pms_room_type_id=apartment.id_room_type,
        language=lang,
        sections_present=tuple(present),
        sections_missing=quirks.missing,
        section_titles=titles,
        section_kinds=kinds,
        wifi_network=network,
        wifi_password=password,
        wifi_title_complete="wifi" in present and not quirks.wifi_title_incomplete,
        wifi_callout_words="wifi" in present and quirks.wifi_callout_words,
        first_toggle_mentions_wifi=quirks.first_toggle_wifi,
        stray_wifi_mentions=quirks.stray_mentions,
        long_toggle=quirks.long_toggle,
        toggle_count=toggles,
    )
    return PageSeed(
        id=page_id,
        title=apartment.name,
        room_type_id=apartment.id_room_type,
        address=apartment.check_in.address,
        created_time=created,
        blocks=blocks,
        truth=truth,
    )


def _wifi_of(rng: random.Random, apartment: Apartment) -> tuple[str, str]:
    # The booking system's house manual already names the WiFi: the notes page agrees with it.
    for section in apartment.house_manual:
        match = _WIFI_IN_MANUAL.search(section.body)
        if match:
            return match["network"], match["password"]
    flower = apartment.name.split()[-1]
    return f"Sandbox-{flower}", "".join(rng.choices(string.ascii_lowercase + string.digits, k=10))


def _page_header(rng: random.Random, lang: Language, apartment: Apartment) -> list[dict[str, Any]]:
    name = apartment.name
    blocks = [
        _heading(1, _title(lang, f"Benvenuti a {name}", f"Welcome to {name}")),
        *_paragraphs(
            lang,
            "Qui trovi le informazioni sulla casa e sui dintorni. Apri le sezioni qui sotto.",
            "Here you find everything about the apartment and the area. Open the sections below.",
        ),
    ]
    if rng.random() < 0.4:
        # A block type the client keeps as raw.
        blocks.append(
            _block(
                "quote",
                _rich(
                    _title(
                        lang,
                        "Casa dolce casa, anche in vacanza.",
                        "Home sweet home, on holiday too.",
                    )
                ),
            )
        )
    blocks.append(_block("divider"))
    return blocks


def _welcome_toggle(lang: Language, mentions_wifi: bool) -> dict[str, Any]:
    children = _paragraphs(
        lang,
        "Siamo felici di averti qui. Per qualsiasi domanda scrivici nella chat della prenotazione.",
        "We are happy to have you here. For any question write to us in the booking chat.",
    )
    if mentions_wifi:
        children += _paragraphs(
            lang,
            "Il codice wifi è nella sezione WiFi più sotto.",
            "The wifi code is in the WiFi section below.",
        )
    return _toggle(_title(lang, "Benvenuti!", "Welcome!"), children)


def _wifi_title(lang: Language, network: str, password: str) -> str:
    label = {"it": "rete", "en": "network", "bi": "rete/network"}[lang]
    return f"WiFi - {label} {network} · password {password}"


def _wifi_body(
    rng: random.Random, lang: Language, network: str, password: str, callout_words: bool
) -> list[dict[str, Any]]:
    net_label = {"it": "Rete: ", "en": "Network: ", "bi": "Rete / Network: "}[lang]
    kind = rng.choice(["paragraph", "bulleted_list_item"])
    body = [
        _block(kind, [_text(net_label, bold=True), _text(network)]),
        _block(kind, [_text("Password: ", bold=True), _text(password)]),
    ]
    if rng.random() < 0.5:
        body += _paragraphs(
            lang,
            "La connessione è gratuita e copre tutto l'appartamento.",
            "The connection is free and covers the whole apartment.",
        )
    if callout_words:
        it, en = rng.choice(_WIFI_CALLOUTS_WITH_WORDS)
        body.append(_callout(_title(lang, it, en), "📶"))
    elif rng.random() < 0.5:
        body.append(
            _callout(
                _title(
                    lang,
                    "Il router è nell'ingresso: se le luci sono rosse, staccalo per 10 secondi.",
                    "The router is in the hallway: if its lights are red, unplug it for 10 s.",
                ),
                "💡",
            )
        )
    return body


_WIFI_CALLOUTS_WITH_WORDS = [
    (
        "Se il wifi non funziona, spegni e riaccendi il router.",
        "If the wifi does not work, switch the router off and on again.",
    ),
    (
        "Internet in fibra fino a 100 Mbit/s, ideale per lo smart working.",
        "Fibre internet up to 100 Mbit/s, good for remote work.",
    ),
    (
        "Il wifi arriva anche sul balcone.",
        "The wifi reaches the balcony too.",
    ),
]


def _check_in_out_body(
    rng: random.Random, lang: Language, apartment: Apartment
) -> list[dict[str, Any]]:
    ci = apartment.check_in
    body = _paragraphs(
        lang,
        f"Check-in dalle {ci.check_in_from} alle {ci.check_in_until}.",
        f"Check-in from {ci.check_in_from} to {ci.check_in_until}.",
    )
    body += _paragraphs(
        lang,
        f"Check-out entro le {ci.check_out_until}.",
        f"Check-out by {ci.check_out_until}.",
    )
    if rng.random() < 0.6:
        body.append(
            _bullet(
                lang,
                "Check-in tardivo su richiesta, scrivici il giorno prima.",
                "Late check-in on request, write to us the day before.",
            )
        )
    return body


def _how_to_reach_body(
    rng: random.Random, lang: Language, apartment: Apartment
) -> list[dict[str, Any]]:
    address = apartment.check_in.address
    bus = rng.randint(1, 40)
    return [
        _block(
            "paragraph",
            [_text(_title(lang, "Indirizzo: ", "Address: "), bold=True), _text(address)],
        ),
        *_paragraphs(
            lang,
            f"Dalla stazione prendi l'autobus {bus} fino alla fermata Esempi (15 minuti).",
            f"From the station take bus {bus} to the stop Esempi (15 minutes).",
        ),
        _toggle(
            _title(lang, "In auto", "By car"),
            _paragraphs(
                lang,
                "Esci dall'autostrada a Sandboxville Nord e segui le indicazioni per il centro.",
                "Leave the motorway at Sandboxville Nord and follow the signs to the centre.",
            ),
        ),
        _toggle(
            _title(lang, "In treno", "By train"),
            _paragraphs(
                lang,
                "La stazione centrale è a 2 km; un taxi costa circa 12 euro.",
                "The central station is 2 km away; a taxi costs about 12 euros.",
            ),
        ),
    ]


def _house_rules_body(
    rng: random.Random, lang: Language, apartment: Apartment
) -> list[dict[str, Any]]:
    rules = [
        ("Vietato fumare in casa", "No smoking indoors"),
        ("Niente feste o eventi", "No parties or events"),
        ("Silenzio dalle 22:00 alle 08:00", "Quiet hours from 22:00 to 08:00"),
        ("Animali ammessi solo su richiesta", "Pets only on request"),
        (
            f"Massimo {apartment.max_guests} ospiti",
            f"At most {apartment.max_guests} guests",
        ),
    ]
    return [_bullet(lang, it, en) for it, en in rules[: rng.randint(3, 5)]]


def _before_departure_body(
    rng: random.Random, lang: Language, apartment: Apartment
) -> list[dict[str, Any]]:
    steps = [
        ("Lascia le chiavi nella cassetta", "Leave the keys in the key box"),
        ("Porta fuori la spazzatura", "Take out the rubbish"),
        ("Chiudi le finestre", "Close the windows"),
        ("Spegni luci e aria condizionata", "Switch off lights and air conditioning"),
        ("Metti le stoviglie in lavastoviglie", "Put the dishes in the dishwasher"),
    ]
    kind = rng.choice(["bulleted_list_item", "numbered_list_item"])
    return [_block(kind, _rich(_title(lang, it, en))) for it, en in steps[: rng.randint(3, 5)]]


_SECTION_BODIES = {
    "check_in_out": _check_in_out_body,
    "how_to_reach": _how_to_reach_body,
    "house_rules": _house_rules_body,
    "before_departure": _before_departure_body,
}


# --- the other toggles -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Topic:
    it: str
    en: str
    body: tuple[tuple[str, str], ...]
    bullets: tuple[tuple[str, str], ...] = ()
    callout: tuple[str, str] | None = None
    nested: tuple[tuple[str, str, str, str], ...] = ()
    stray: tuple[str, str] | None = None  # the body as written on pages with stray mentions


_TOPICS: tuple[_Topic, ...] = (
    _Topic(
        "Parcheggio",
        "Parking",
        (
            (
                "Il parcheggio pubblico più vicino è in Piazza degli Esempi, a 200 metri.",
                "The nearest public car park is in Piazza degli Esempi, 200 metres away.",
            ),
            (
                "Sulle strisce blu si paga dalle 8:00 alle 20:00; la domenica è gratis.",
                "Blue lines are paid from 8:00 to 20:00; Sundays are free.",
            ),
        ),
        callout=(
            "Non parcheggiare nella corte interna: è riservata ai residenti.",
            "Do not park in the inner courtyard: it is reserved for residents.",
        ),
    ),
    _Topic(
        "Raccolta differenziata",
        "Rubbish and recycling",
        (
            (
                "I bidoni sono nel cortile, accanto al portone.",
                "The bins are in the courtyard, next to the main door.",
            ),
        ),
        bullets=(
            ("Carta e cartone: martedì", "Paper and cardboard: Tuesday"),
            ("Plastica e lattine: giovedì", "Plastic and cans: Thursday"),
            ("Organico: lunedì, mercoledì e sabato", "Food waste: Monday, Wednesday, Saturday"),
            ("Vetro: campana in fondo alla via", "Glass: bottle bank at the end of the street"),
            ("Indifferenziato: venerdì", "General waste: Friday"),
        ),
    ),
    _Topic(
        "Riscaldamento",
        "Heating",
        (
            (
                "Il riscaldamento è autonomo: il termostato è in soggiorno.",
                "Heating is independent: the thermostat is in the living room.",
            ),
            (
                "Tienilo a 20 gradi e spegnilo quando apri le finestre.",
                "Keep it at 20 degrees and switch it off when you open the windows.",
            ),
        ),
    ),
    _Topic(
        "Aria condizionata",
        "Air conditioning",
        (
            (
                "Il telecomando è nel cassetto del comodino.",
                "The remote control is in the bedside drawer.",
            ),
            ("Spegni il climatizzatore quando esci.", "Switch the air conditioning off when out."),
        ),
        callout=(
            "Impostazione consigliata: 25 °C e ventola automatica.",
            "Recommended setting: 25 °C, fan on auto.",
        ),
    ),
    _Topic(
        "Elettrodomestici",
        "Appliances",
        (("In cucina trovi tutto il necessario.", "The kitchen has everything you need."),),
        nested=(
            (
                "Lavatrice",
                "Washing machine",
                "Il detersivo è sotto il lavello; usa il programma a 40 °C.",
                "Detergent is under the sink; use the 40 °C programme.",
            ),
            (
                "Lavastoviglie",
                "Dishwasher",
                "Le pastiglie sono nel mobile a sinistra del lavello.",
                "Tablets are in the cupboard left of the sink.",
            ),
            (
                "Forno",
                "Oven",
                "Il forno è elettrico; non lasciarlo acceso senza nessuno in casa.",
                "The oven is electric; never leave it on with nobody at home.",
            ),
            (
                "Piano a induzione",
                "Induction hob",
                "Usa solo le pentole con il simbolo a spirale sul fondo.",
                "Use only pans with the coil symbol underneath.",
            ),
        ),
    ),
    _Topic(
        "Macchina del caffè",
        "Coffee machine",
        (
            ("Trovi una moka e una macchina a capsule.", "There is a moka pot and a pod machine."),
            ("Le prime capsule sono offerte da noi.", "The first pods are on us."),
        ),
    ),
    _Topic(
        "Televisione",
        "Television",
        (
            (
                "La TV riceve i canali nazionali; il telecomando è sul mobile.",
                "The TV receives national channels; the remote is on the cabinet.",
            ),
        ),
        stray=(
            "La smart TV è collegata a internet: puoi usare il tuo account di streaming.",
            "The smart TV is connected to the internet: you can use your streaming account.",
        ),
    ),
    _Topic(
        "Asciugacapelli e ferro da stiro",
        "Hairdryer and iron",
        (
            (
                "L'asciugacapelli è in bagno; ferro e asse sono nell'armadio dell'ingresso.",
                "The hairdryer is in the bathroom; iron and board are in the hall cupboard.",
            ),
        ),
    ),
    _Topic(
        "Biancheria e asciugamani",
        "Bed linen and towels",
        (
            (
                "Biancheria e asciugamani inclusi; oltre 7 notti li cambiamo a metà soggiorno.",
                "Linen and towels are included; for stays over 7 nights we change them midway.",
            ),
        ),
    ),
    _Topic(
        "Pulizie",
        "Cleaning",
        (
            (
                "La pulizia finale è inclusa. Una pulizia extra costa 30 euro.",
                "Final cleaning is included. An extra cleaning costs 30 euros.",
            ),
        ),
    ),
    _Topic(
        "Supermercati",
        "Supermarkets",
        (
            (
                "Il supermercato Esempio è a 5 minuti a piedi, aperto dalle 8:00 alle 21:00.",
                "The Esempio supermarket is a 5-minute walk, open from 8:00 to 21:00.",
            ),
        ),
    ),
    _Topic(
        "Farmacia",
        "Pharmacy",
        (
            (
                "La farmacia di turno è indicata sulla porta della farmacia in piazza.",
                "The pharmacy on duty is posted on the door of the pharmacy in the square.",
            ),
        ),
    ),
    _Topic(
        "Dove mangiare",
        "Where to eat",
        (("I nostri posti preferiti:", "Our favourite places:"),),
        bullets=(
            ("Trattoria Esempio: cucina tipica", "Trattoria Esempio: local food"),
            ("Pizzeria Prova: forno a legna", "Pizzeria Prova: wood-fired oven"),
            ("Osteria Fittizia: vini locali", "Osteria Fittizia: local wines"),
            ("Gelateria Demo: gelato artigianale", "Gelateria Demo: home-made ice cream"),
        ),
    ),
    _Topic(
        "Trasporti pubblici",
        "Public transport",
        (
            (
                "I biglietti dell'autobus si comprano in tabaccheria.",
                "Bus tickets are sold at the tobacconist's.",
            ),
        ),
    ),
    _Topic(
        "Taxi",
        "Taxi",
        (
            (
                "Il posteggio dei taxi è davanti alla stazione; di notte prenota con l'app.",
                "The taxi rank is in front of the station; at night book with the app.",
            ),
        ),
    ),
    _Topic(
        "Spiagge e parchi",
        "Beaches and parks",
        (
            (
                "Il parco comunale è a 10 minuti a piedi; la spiaggia libera a 20 minuti in bus.",
                "The town park is a 10-minute walk; the free beach 20 minutes by bus.",
            ),
        ),
    ),
    _Topic(
        "Musei e cultura",
        "Museums and culture",
        (
            (
                "Il museo civico è gratuito la prima domenica del mese.",
                "The town museum is free on the first Sunday of the month.",
            ),
        ),
    ),
    _Topic(
        "Numeri utili",
        "Useful numbers",
        (
            (
                "Emergenze: 112, gratuito da qualsiasi telefono.",
                "Emergency: 112, free from any phone.",
            ),
            (
                "Per qualsiasi problema con la casa scrivici nella chat della prenotazione.",
                "For any problem with the apartment write to us in the booking chat.",
            ),
        ),
    ),
    _Topic(
        "Chiavi",
        "Keys",
        (
            (
                "Il mazzo contiene la chiave del portone e quella dell'appartamento.",
                "The bunch has the key of the main door and the one of the apartment.",
            ),
            (
                "In caso di smarrimento la sostituzione costa 50 euro.",
                "If lost, a replacement costs 50 euros.",
            ),
        ),
    ),
    _Topic(
        "Animali",
        "Pets",
        (
            (
                "Gli animali di piccola taglia sono benvenuti su richiesta.",
                "Small pets are welcome on request.",
            ),
        ),
    ),
    _Topic(
        "Bambini",
        "Children",
        (
            (
                "Su richiesta forniamo culla e seggiolone senza costi aggiuntivi.",
                "On request we provide a cot and a high chair at no extra cost.",
            ),
        ),
    ),
    _Topic(
        "Balcone",
        "Balcony",
        (
            (
                "Chiudi l'ombrellone quando c'è vento.",
                "Close the parasol when it is windy.",
            ),
        ),
    ),
    _Topic(
        "Ascensore",
        "Lift",
        (
            (
                "L'ascensore arriva al quarto piano; i bambini lo usano accompagnati.",
                "The lift goes up to the fourth floor; children use it with an adult.",
            ),
        ),
    ),
    _Topic(
        "Biciclette",
        "Bicycles",
        (
            (
                "Puoi lasciare le biciclette nel deposito al piano terra.",
                "You can leave bicycles in the storage room on the ground floor.",
            ),
        ),
    ),
    _Topic(
        "Deposito bagagli",
        "Luggage storage",
        (
            (
                "Se arrivi prima dell'orario puoi lasciare le valigie in Via degli Esempi 5.",
                "If you arrive early you can leave your luggage at Via degli Esempi 5.",
            ),
        ),
    ),
    _Topic(
        "Tassa di soggiorno",
        "Tourist tax",
        (
            (
                "La tassa è di 2 euro a persona a notte, per massimo 5 notti; si paga all'arrivo.",
                "The tax is 2 euros per person per night, at most 5 nights; paid on arrival.",
            ),
        ),
    ),
    _Topic(
        "Acqua calda",
        "Hot water",
        (
            (
                "La caldaia è nel ripostiglio: se l'acqua è fredda, premi il tasto reset.",
                "The boiler is in the storeroom: if the water is cold, press the reset button.",
            ),
        ),
    ),
    _Topic(
        "Elettricità",
        "Electricity",
        (
            (
                "Il contatore è sul pianerottolo; se salta la corrente, riarma l'interruttore.",
                "The meter is on the landing; if the power trips, reset the main switch.",
            ),
        ),
        callout=(
            "Non usare forno e lavatrice insieme: la potenza è di 3 kW.",
            "Do not use the oven and the washing machine together: power is 3 kW.",
        ),
    ),
    _Topic(
        "Cassaforte",
        "Safe",
        (
            (
                "La cassaforte è nell'armadio della camera; le istruzioni sono sullo sportello.",
                "The safe is in the bedroom wardrobe; instructions are on its door.",
            ),
        ),
    ),
    _Topic(
        "Pronto soccorso",
        "First aid",
        (("Il kit è nel mobile del bagno.", "The kit is in the bathroom cabinet."),),
    ),
    _Topic(
        "Sicurezza",
        "Safety",
        (
            (
                "L'estintore è accanto alla porta; il rilevatore di fumo è in cucina.",
                "The fire extinguisher is by the door; the smoke detector is in the kitchen.",
            ),
        ),
    ),
    _Topic(
        "Mercato rionale",
        "Local market",
        (
            (
                "Il mercato si tiene il mercoledì mattina in Piazza degli Esempi.",
                "The market is on Wednesday mornings in Piazza degli Esempi.",
            ),
        ),
    ),
    _Topic(
        "Eventi in zona",
        "Local events",
        (
            (
                "In estate ci sono concerti gratuiti nel parco ogni venerdì.",
                "In summer there are free concerts in the park every Friday.",
            ),
        ),
    ),
    _Topic(
        "Panificio e colazione",
        "Bakery and breakfast",
        (
            (
                "Il panificio Demo apre alle 7:00: prova i cornetti.",
                "The Demo bakery opens at 7:00: try the croissants.",
            ),
        ),
    ),
    _Topic(
        "Lavorare da remoto",
        "Working remotely",
        (
            (
                "Il tavolo del soggiorno è comodo per lavorare; c'è una lampada nell'armadio.",
                "The living-room table is good for work; there is a lamp in the wardrobe.",
            ),
        ),
        stray=(
            "La connessione wifi regge le videochiamate; il router è accanto al tavolo.",
            "The wifi connection handles video calls; the router is next to the table.",
        ),
    ),
    _Topic(
        "Finestre e tapparelle",
        "Windows and shutters",
        (
            (
                "Le tapparelle sono elettriche: usa i pulsanti accanto alle finestre.",
                "The shutters are electric: use the buttons next to the windows.",
            ),
        ),
    ),
    _Topic(
        "Lavanderia self-service",
        "Laundrette",
        (
            (
                "La lavanderia in Via Prova 3 è aperta tutti i giorni dalle 7:00 alle 22:00.",
                "The laundrette at Via Prova 3 is open daily from 7:00 to 22:00.",
            ),
        ),
    ),
    _Topic(
        "Arrivo in tarda serata",
        "Late arrival",
        (
            (
                "Se arrivi dopo le 22:00 avvisaci: ti mandiamo le istruzioni per entrare.",
                "If you arrive after 22:00 let us know: we send you the instructions to get in.",
            ),
        ),
    ),
    _Topic(
        "Camere e letti",
        "Bedrooms and beds",
        (
            (
                "Il divano letto si apre tirando la maniglia centrale.",
                "The sofa bed opens by pulling the central handle.",
            ),
        ),
    ),
    _Topic(
        "Cucina",
        "Kitchen",
        (
            (
                "Olio, sale, zucchero e caffè sono a tua disposizione.",
                "Oil, salt, sugar and coffee are there for you.",
            ),
        ),
    ),
    _Topic(
        "Gite fuori porta",
        "Day trips",
        (
            (
                "Il borgo di Testopoli è a 30 minuti di treno: merita una visita.",
                "The village of Testopoli is 30 minutes by train: worth a visit.",
            ),
        ),
    ),
)

_STRAY_TOPICS = frozenset(i for i, t in enumerate(_TOPICS) if t.stray is not None)

_GROUP_HEADINGS = [
    ("La casa", "The apartment"),
    ("Dintorni", "Around the area"),
    ("Altre informazioni", "More information"),
]


def _other_toggles(
    rng: random.Random, lang: Language, count: int, stray: bool
) -> list[dict[str, Any]]:
    count = max(0, min(count, len(_TOPICS)))
    chosen = rng.sample(range(len(_TOPICS)), count)
    if stray and not _STRAY_TOPICS & set(chosen):
        # Stray mentions need at least one topic that carries them.
        chosen[-1] = rng.choice(sorted(_STRAY_TOPICS))
    return [_topic_toggle(rng, lang, _TOPICS[i], stray) for i in chosen]


def _topic_toggle(rng: random.Random, lang: Language, topic: _Topic, stray: bool) -> dict[str, Any]:
    children: list[dict[str, Any]] = []
    body = (topic.stray,) if stray and topic.stray is not None else topic.body
    for it, en in body:
        children += _paragraphs(lang, it, en)
    children += [_bullet(lang, it, en) for it, en in topic.bullets]
    for it_title, en_title, it, en in topic.nested:
        children.append(_toggle(_title(lang, it_title, en_title), _paragraphs(lang, it, en)))
    if topic.callout is not None and rng.random() < 0.7:
        children.append(_callout(_title(lang, *topic.callout), rng.choice(["💡", "⚠️", "📌"])))
    return _toggle(_title(lang, topic.it, topic.en), children)


def _long_toggle(rng: random.Random, lang: Language) -> dict[str, Any]:
    kinds = ["Trattoria", "Pizzeria", "Osteria"]
    names = ["Esempio", "Prova", "Fittizia", "Demo", "Sandbox"]
    items = []
    for n in range(1, rng.randint(101, 130) + 1):
        kind, name, minutes = rng.choice(kinds), rng.choice(names), rng.randint(2, 25)
        items.append(
            _bullet(
                lang,
                f"{kind} {name} {n}: {minutes} minuti a piedi",
                f"{kind} {name} {n}: {minutes} minutes on foot",
            )
        )
    return _toggle(
        _title(lang, "Elenco completo di ristoranti e bar", "Full list of restaurants and bars"),
        items,
    )


# --- block builders (request shape) ----------------------------------------------------------


def _title(lang: Language, it: str, en: str) -> str:
    if lang == "it":
        return it
    if lang == "en":
        return en
    return it if it == en else f"{it} / {en}"


def _text(content: str, *, bold: bool = False) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "text", "text": {"content": content}}
    if bold:
        item["annotations"] = {"bold": True}
    return item


def _rich(content: str) -> list[dict[str, Any]]:
    return [_text(content)]


def _block(
    kind: str,
    rich_text: list[dict[str, Any]] | None = None,
    children: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    content: dict[str, Any] = {} if rich_text is None else {"rich_text": rich_text}
    content.update(extra)
    if children:
        content["children"] = children
    return {"object": "block", "type": kind, kind: content}


def _heading(level: int, text: str) -> dict[str, Any]:
    return _block(f"heading_{level}", _rich(text))


def _toggle(title: str, children: list[dict[str, Any]]) -> dict[str, Any]:
    return _block("toggle", _rich(title), children)


def _callout(text: str, emoji: str) -> dict[str, Any]:
    return _block(
        "callout", _rich(text), icon={"type": "emoji", "emoji": emoji}, color="gray_background"
    )


def _paragraphs(lang: Language, it: str, en: str) -> list[dict[str, Any]]:
    if lang == "en":
        return [_block("paragraph", _rich(en))]
    return [_block("paragraph", _rich(it)), _block("paragraph", _rich(en))]


def _bullet(lang: Language, it: str, en: str) -> dict[str, Any]:
    return _block("bulleted_list_item", _rich(_title(lang, it, en)))


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)
