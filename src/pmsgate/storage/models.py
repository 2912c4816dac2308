"""Tables. Secrets are stored only as vault ciphertext (``*_enc``) or hashes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from pmsgate.storage.db import Base


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC, on SQLite as on PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime stored; use timezone-aware UTC")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Facility(Base):
    """One booking-system property the gateway calls on behalf of a customer."""

    __tablename__ = "facilities"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    hotel_id: Mapped[str] = mapped_column(String(32), unique=True)
    username: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))  # partner | own
    password_enc: Mapped[str] = mapped_column(Text)
    api_key_enc: Mapped[str | None] = mapped_column(Text, nullable=True)
    integration_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200), default="")
    status: Mapped[str] = mapped_column(String(16), default="connected")
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_auth_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    limit_per_minute: Mapped[int] = mapped_column(Integer, default=10)
    limit_per_hour: Mapped[int] = mapped_column(Integer, default=300)
    limit_per_day: Mapped[int] = mapped_column(Integer, default=5000)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)

    keys: Mapped[list[GatewayKey]] = relationship(
        back_populates="facility", cascade="all, delete-orphan"
    )


class GatewayKey(Base):
    """A caller's key for one facility; only its SHA-256 is kept."""

    __tablename__ = "gateway_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    facility_id: Mapped[int] = mapped_column(ForeignKey("facilities.id", ondelete="CASCADE"))
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(100), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)

    facility: Mapped[Facility] = relationship(back_populates="keys")


class FacilityToken(Base):
    """The facility's current booking-system token, encrypted; shared by replicas."""

    __tablename__ = "facility_tokens"

    facility_id: Mapped[int] = mapped_column(
        ForeignKey("facilities.id", ondelete="CASCADE"), primary_key=True
    )
    token_enc: Mapped[str] = mapped_column(Text)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    obtained_at: Mapped[datetime] = mapped_column(UtcDateTime)


class IdempotencyRecord(Base):
    """One write as the caller named it: its body hash, its state and the stored answer."""

    __tablename__ = "idempotency_records"
    __table_args__ = (UniqueConstraint("facility_id", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    facility_id: Mapped[int] = mapped_column(ForeignKey("facilities.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(200))
    operation: Mapped[str] = mapped_column(String(100))
    body_hash: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))  # in_flight | done | unknown | failed
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    response: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
