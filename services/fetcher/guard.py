"""The fetcher's SSRF guard: ``shared.guard`` (the notifier guards webhook targets with it too)."""

from __future__ import annotations

from shared.guard import (
    Allowlist,
    GuardedResolver,
    UnsafeURL,
    check_ip,
    check_target,
    check_url,
    guard_trace_config,
    unsafe_cause,
)

__all__ = [
    "Allowlist",
    "GuardedResolver",
    "UnsafeURL",
    "check_ip",
    "check_target",
    "check_url",
    "guard_trace_config",
    "unsafe_cause",
]
