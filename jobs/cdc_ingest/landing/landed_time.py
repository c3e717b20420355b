"""When a landed file landed, and landing-time ranges: what replays and backfills select by.

A pipeline's ``landed_at`` says where a file's landing time comes from:

- ``object_time`` (default): the file's modification time, or the S3 object's LastModified;
- ``{path_pattern: "dt=%Y-%m-%d"}``: a date (and optionally hour/minute/second) partition in the
  file's path, read with the ``strftime`` directives %Y %m %d %H %M %S (UTC). A file whose path
  does not match has no landing time and is in no range.

Ranges are half-open, ``[start, end)``, in UTC; either end may be open. Plain Python only: the
DAG processor and the CLI's argument checks import this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import pydantic
from pydantic import field_validator

from cdc_ingest.config_model import SECTION
from cdc_ingest.landing.zones import LandedFile

OBJECT_TIME = "object_time"
_DIRECTIVES = {"Y": r"\d{4}", "m": r"\d{2}", "d": r"\d{2}", "H": r"\d{2}", "M": r"\d{2}"}
_DIRECTIVES["S"] = r"\d{2}"
INSTANT_HELP = "an ISO 8601 date or date-time, e.g. 2026-11-20 or 2026-11-20T06:00:00+00:00"


class LandedAtError(ValueError):
    """A ``landed_at`` setting or an instant that cannot be used."""


@pydantic.dataclasses.dataclass(frozen=True, config=SECTION)
class LandedAt:
    """Where a pipeline's landing times come from: object time, or a pattern in the path."""

    path_pattern: str | None = None

    @field_validator("path_pattern")
    @classmethod
    def _dated(cls, pattern: str | None) -> str | None:
        if pattern is None:
            return None
        if "%Y" not in pattern:
            raise ValueError("must be a string containing %Y")
        used = re.findall(r"%(.)", pattern.replace("%%", ""))
        unknown = {d for d in used if d not in _DIRECTIVES}
        if unknown:
            raise ValueError(
                f"{pattern!r}: unsupported directives "
                f"{', '.join('%' + d for d in sorted(unknown))} (use %Y %m %d %H %M %S)"
            )
        return pattern

    @property
    def regex(self) -> re.Pattern[str]:
        """The path pattern as a regular expression matching the text ``strptime`` reads."""
        assert self.path_pattern is not None
        parts: list[str] = []
        for literal, directive in re.findall(r"([^%]*)(?:%(.))?", self.path_pattern):
            parts.append(re.escape(literal))
            if directive == "%":
                parts.append("%")
            elif directive:
                parts.append(_DIRECTIVES[directive])
        return re.compile("".join(parts))

    def landed(self, landed: LandedFile) -> datetime | None:
        """When the file landed (UTC), or None when it cannot be told."""
        if self.path_pattern is None:
            if landed.modified is None:
                return None
            return datetime.fromtimestamp(landed.modified, UTC)
        # The last match wins: partitions nest left to right (…/dt=…/hour=…).
        matches = list(self.regex.finditer(unquote(landed.uri)))
        if not matches:
            return None
        try:
            return datetime.strptime(matches[-1].group(0), self.path_pattern).replace(tzinfo=UTC)
        except ValueError:
            return None

    def describe(self) -> str:
        """``object_time`` or ``path_pattern <pattern>``, for summaries."""
        return OBJECT_TIME if self.path_pattern is None else f"path_pattern {self.path_pattern}"


def landed_at_section(value: Any) -> Any:
    """The ``landed_at`` key's short form: ``object_time`` (or absent) is the file's own time."""
    if value in (None, OBJECT_TIME):
        return {}
    if not isinstance(value, dict | LandedAt):
        example = '{path_pattern: "dt=%Y-%m-%d"}'
        raise ValueError(f"expected {OBJECT_TIME} or {example}, got {value!r}")
    return value


def parse_instant(text: str) -> datetime:
    """An ISO 8601 date or date-time as an aware UTC datetime (no zone: UTC).

    Raises:
        LandedAtError: the text is not such a value.
    """
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise LandedAtError(f"{text!r} is not {INSTANT_HELP}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


@dataclass(frozen=True)
class LandedRange:
    """Landing times ``[start, end)`` (UTC); None is an open end."""

    start: datetime | None = None
    end: datetime | None = None

    def __post_init__(self) -> None:
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise LandedAtError(
                f"replay_from {self.start.isoformat()} must be before "
                f"replay_to {self.end.isoformat()}"
            )

    def contains(self, instant: datetime | None) -> bool:
        """Whether a landing time is in the range (an unknown one never is)."""
        if instant is None:
            return False
        if self.start is not None and instant < self.start:
            return False
        return self.end is None or instant < self.end

    def to_json(self) -> dict[str, str | None]:
        """``{"from": iso, "to": iso}``."""
        return {
            "from": self.start.isoformat() if self.start else None,
            "to": self.end.isoformat() if self.end else None,
        }
