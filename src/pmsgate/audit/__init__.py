"""The audit trail: an append-only record of security-relevant events (docs/audit.md).

``AuditTrail`` (``container.audit``) records and reads events; ``Actor``, ``AuditAction``
and ``Outcome`` say who did what and how it ended.
"""

from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditDetailsError, AuditTrail

__all__ = ["Actor", "AuditAction", "AuditDetailsError", "AuditTrail", "Outcome"]
