"""The upstream kit: what the three outbound clients share (docs/requirements.md R10.2-R10.4).

pmsgate speaks to three systems it does not own: the booking system (``integrations/kross/``), the
assistant platform (``integrations/assistant/client.py``) and the notes workspace
(``integrations/notion/client.py``). Each client keeps its own wire details; everything about
*failing* well is defined once, here:

- :mod:`.errors` — one error root, :class:`UpstreamError`, with the fields every
  failure has (operation, status, upstream code, request id, retryable,
  may-have-been-sent). Each client's family derives from it::

      UpstreamError
       ├── KrossError        (pms.errors: AuthenticationFailed, TokenRejected, RateLimited, …)
       ├── AssistantError   (platform.errors: AssistantNotFound, AssistantRateLimited, …)
       └── NotionError      (platform.notes: NotionRateLimited, NotionUnavailable, …)

- :mod:`.classification` — error classification as **data**: a table per upstream
  (``integrations/kross/errors.yaml``, …) maps an HTTP status and an upstream error code to an
  :class:`ErrorKind`; the client maps the kind to its own class.
- :mod:`.http` — the one ``Retry-After`` parser, the one request deadline, the one
  secret scrubber, and the transport failures that prove nothing was sent.
- :mod:`.retry` — the one retry policy, built on stamina: a known number of attempts,
  jittered exponential backoff, ``Retry-After`` honoured up to a cap, writes never
  re-sent once they may have reached the server.
"""

from pmsgate.integrations.kit.classification import ClassificationTable, ErrorKind, Rule
from pmsgate.integrations.kit.errors import UpstreamError
from pmsgate.integrations.kit.http import NOT_SENT, Scrubber, deadline, parse_retry_after
from pmsgate.integrations.kit.retry import RetryPolicy

__all__ = [
    "NOT_SENT",
    "ClassificationTable",
    "ErrorKind",
    "RetryPolicy",
    "Rule",
    "Scrubber",
    "UpstreamError",
    "deadline",
    "parse_retry_after",
]
