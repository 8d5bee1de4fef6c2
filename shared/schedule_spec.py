"""Schedule specs of sources and schedules: ``@daily``, ``@every 30m``, five-field cron.

``@every`` intervals are anchored to the Unix epoch rather than to "now": ``@every 4h`` fires
at 00:00, 04:00, 08:00 … UTC, the way ``0 */4 * * *`` would. That keeps ``next_after``
deterministic (every scheduler replica computes the same run time) and free of drift.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from croniter import CroniterBadDateError, croniter

ALIASES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
}

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_EVERY_RE = re.compile(r"@every\s+(\d+)\s*([smhd])")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HINT = "use @hourly, @daily, @weekly, @monthly, @yearly, '@every <n>s|m|h|d' or five-field cron"


@dataclass(frozen=True)
class ScheduleSpec:
    """A parsed schedule: either a cron expression or a fixed interval."""

    text: str  # the spec as written (whitespace trimmed)
    cron: str | None = None  # five-field expression (aliases expanded)
    interval: timedelta | None = None

    def next_after(self, dt: datetime) -> datetime:
        """The first run strictly after ``dt`` (timezone-aware), in UTC."""
        if dt.tzinfo is None or dt.utcoffset() is None:
            raise ValueError("next_after needs a timezone-aware datetime")
        dt = dt.astimezone(UTC)
        if self.interval is not None:
            step = self.interval
            periods = (dt - _EPOCH) // step  # whole intervals elapsed, so the result is > dt
            return _EPOCH + (periods + 1) * step
        assert self.cron is not None
        result = croniter(self.cron, dt).get_next(datetime)
        return result.astimezone(UTC)


def parse_schedule(spec: str) -> ScheduleSpec:
    """Parse a schedule spec; ``ValueError`` with a readable message when it is not one."""
    if not isinstance(spec, str):
        raise ValueError(f"schedule must be a string, got {type(spec).__name__}")
    text = " ".join(spec.split())
    if not text:
        raise ValueError(f"empty schedule: {_HINT}")
    if text.startswith("@every"):
        match = _EVERY_RE.fullmatch(text)
        if not match:
            raise ValueError(f"{spec!r}: write @every as e.g. '@every 30m' or '@every 4h'")
        seconds = int(match[1]) * _UNITS[match[2]]
        if seconds <= 0:
            raise ValueError(f"{spec!r}: the interval must be positive")
        return ScheduleSpec(text=text, interval=timedelta(seconds=seconds))
    if text.startswith("@"):
        cron = ALIASES.get(text.lower())
        if cron is None:
            raise ValueError(f"{spec!r}: unknown alias; {_HINT}")
        return ScheduleSpec(text=text, cron=cron)
    if len(text.split(" ")) != 5:
        raise ValueError(f"{spec!r}: a cron expression has five fields; {_HINT}")
    if not croniter.is_valid(text):
        raise ValueError(f"{spec!r}: not a valid cron expression")
    try:  # valid syntax can still never fire (``0 0 30 2 *``)
        croniter(text, _EPOCH).get_next(datetime)
    except CroniterBadDateError:
        raise ValueError(f"{spec!r}: this cron expression never fires") from None
    return ScheduleSpec(text=text, cron=text)
