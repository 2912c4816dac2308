"""The only code that speaks to the booking system (Kross Booking API v5).

Wire contract: ``docs/kross-api.md``. Operation table: ``operations.yaml``.
"""

from pmsgate.integrations.kross.client import KrossClient, KrossResult, Token
from pmsgate.integrations.kross.credentials import (
    Credentials,
    InvalidCredentials,
    credential_problems,
)
from pmsgate.integrations.kross.dates import (
    FilteredReservations,
    FilteredRows,
    enforce_reservation_filters,
    filter_availability,
    filter_by_date_field,
    filter_by_stay,
    filter_in_house,
    stay_overlaps,
)
from pmsgate.integrations.kross.errors import (
    AccessDenied,
    AuthenticationFailed,
    EdgeBlocked,
    HtmlInsteadOfJson,
    InvalidRequest,
    KrossError,
    OutOfScopeOperation,
    RateLimited,
    TokenRejected,
    TooManySessions,
    UnexpectedResponse,
    UnknownOperation,
    UpstreamUnavailable,
    WriteOutcomeUnknown,
)
from pmsgate.integrations.kross.operations import (
    InvalidOperationTable,
    Operation,
    OperationKind,
    OperationTable,
    load_operations,
)

__all__ = [
    "AccessDenied",
    "AuthenticationFailed",
    "Credentials",
    "EdgeBlocked",
    "FilteredReservations",
    "FilteredRows",
    "HtmlInsteadOfJson",
    "InvalidCredentials",
    "InvalidOperationTable",
    "InvalidRequest",
    "KrossClient",
    "KrossError",
    "KrossResult",
    "Operation",
    "OperationKind",
    "OperationTable",
    "OutOfScopeOperation",
    "RateLimited",
    "Token",
    "TokenRejected",
    "TooManySessions",
    "UnexpectedResponse",
    "UnknownOperation",
    "UpstreamUnavailable",
    "WriteOutcomeUnknown",
    "credential_problems",
    "enforce_reservation_filters",
    "filter_availability",
    "filter_by_date_field",
    "filter_by_stay",
    "filter_in_house",
    "load_operations",
    "stay_overlaps",
]
