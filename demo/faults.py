"""Fault injection for the demo shop: random knobs plus a per-path script.

The knobs are plain data (`Faults`, what tests and the control endpoint set); `FaultInjector`
holds the mutable part (the seeded RNG and the script cursors) and decides each response.
Random faults draw from `random.Random(seed)`, so a sequential crawl sees the same faults on
every run.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, fields
from typing import Any

RESET = 0  # a script entry that closes the connection without a response


@dataclass(frozen=True, slots=True)
class Faults:
    """Fault knobs; all off by default. Rates are shares of responses in [0, 1]."""

    latency: float = 0.0  # seconds added to every response
    rate_429: float = 0.0
    retry_after: int = 1  # seconds, sent with every 429
    rate_503: float = 0.0
    rate_slow: float = 0.0
    slow_seconds: float = 2.0
    rate_reset: float = 0.0
    # Exact path+query -> statuses served to successive requests, then normal service.
    # 200 serves the page normally, 0 (RESET) drops the connection, anything else is sent
    # as an error page (429 with Retry-After).
    script: dict[str, list[int]] = field(default_factory=dict)
    # Exact path+query of a product page -> how many responses show it sold out (a transient
    # "sold out": a cache or an inventory service hiccup), then the page as it is.
    sold_out: dict[str, int] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rate_429", "rate_503", "rate_slow", "rate_reset"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1]")
        if self.rate_429 + self.rate_503 + self.rate_reset > 1.0:
            raise ValueError("rate_429 + rate_503 + rate_reset must not exceed 1")
        if self.latency < 0 or self.slow_seconds < 0 or self.retry_after < 0:
            raise ValueError("latency, slow_seconds and retry_after must be >= 0")
        if any(n < 0 for n in self.sold_out.values()):
            raise ValueError("sold_out counts must be >= 0")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Faults:
        """Build from JSON-shaped data (the control endpoint); unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown fault knobs: {sorted(unknown)}")
        script = {str(k): [int(s) for s in v] for k, v in data.get("script", {}).items()}
        sold_out = {str(k): int(v) for k, v in data.get("sold_out", {}).items()}
        return cls(**{**data, "script": script, "sold_out": sold_out})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one request: `status` None serves the page; `reset` drops it."""

    status: int | None = None
    delay: float = 0.0
    reset: bool = False
    retry_after: int | None = None


class FaultInjector:
    """Decides each request's fate from a `Faults`; replace it to reset RNG and scripts."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self._rng = random.Random(faults.seed)
        self._cursor: dict[str, int] = {}
        self._sold_out = dict(faults.sold_out)

    def decide(self, path: str, exempt: bool = False) -> Decision:
        """`path` is path+query as received; `exempt` paths (robots.txt) only follow scripts."""
        f = self.faults
        steps = f.script.get(path)
        if steps is not None:
            n = self._cursor.get(path, 0)
            if n < len(steps):
                self._cursor[path] = n + 1
                return self._scripted(steps[n])
        if exempt:
            return Decision(delay=f.latency)
        delay = f.latency
        if f.rate_slow and self._rng.random() < f.rate_slow:
            delay += f.slow_seconds
        if not (f.rate_reset or f.rate_429 or f.rate_503):
            return Decision(delay=delay)
        roll = self._rng.random()
        if roll < f.rate_reset:
            return Decision(delay=delay, reset=True)
        roll -= f.rate_reset
        if roll < f.rate_429:
            return Decision(status=429, delay=delay, retry_after=f.retry_after)
        roll -= f.rate_429
        if roll < f.rate_503:
            return Decision(status=503, delay=delay)
        return Decision(delay=delay)

    def sold_out(self, path: str) -> bool:
        """Whether this response of the page at ``path`` shows its product sold out (one of
        the ``sold_out`` responses planted for it)."""
        left = self._sold_out.get(path, 0)
        if left <= 0:
            return False
        self._sold_out[path] = left - 1
        return True

    def _scripted(self, status: int) -> Decision:
        f = self.faults
        if status == RESET:
            return Decision(delay=f.latency, reset=True)
        if status == 200:
            return Decision(delay=f.latency)
        retry_after = f.retry_after if status == 429 else None
        return Decision(status=status, delay=f.latency, retry_after=retry_after)
