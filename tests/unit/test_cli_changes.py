"""``trawl changes --since``: an age before now or a time; a typo is a clear error."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from control.cli import build_parser
from control.cli.changes import since
from shared.errors import ConfigError

NOW = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


def test_since_reads_ages_and_times() -> None:
    assert since("12h", NOW) == datetime(2026, 1, 10, 0, 0, tzinfo=UTC)
    assert since("7d", NOW) == datetime(2026, 1, 3, 12, 0, tzinfo=UTC)
    assert since("2026-01-09T08:00:00+01:00") == datetime(2026, 1, 9, 7, 0, tzinfo=UTC)
    assert since("2026-01-09") == datetime(2026, 1, 9, tzinfo=UTC)  # UTC unless it says
    assert since(None) is None
    with pytest.raises(ConfigError, match="12 hours"):
        since("12 hours")


def test_the_command_parses() -> None:
    args = build_parser().parse_args(["changes", "shop", "--since", "1d", "--kind", "new"])
    assert (args.source, args.since, args.kind) == ("shop", "1d", ["new"])


def test_the_command_lists_candidates_by_verification_state() -> None:
    args = build_parser().parse_args(["changes", "shop", "--verification", "cancelled"])
    assert args.verification == ["cancelled"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["changes", "shop", "--verification", "maybe"])
