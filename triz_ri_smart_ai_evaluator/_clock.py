"""The one wall clock: the current time in UTC, timezone-aware.

The pure core never reads a clock; the rooms that do (storage, the guards, the pipelines) take a
``clock`` argument that defaults to :func:`now_utc`, so tests can pin the time.
"""

from __future__ import annotations

from datetime import UTC, datetime


def now_utc() -> datetime:
    """The current time, in UTC and timezone-aware (never a naive datetime)."""
    return datetime.now(UTC)
