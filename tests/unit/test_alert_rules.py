"""Alert conditions on change events, the rule the CLI builds, what a new rule must have, and
the webhook signature."""

from __future__ import annotations

import re
import time

import pytest

from control.cli import build_parser
from control.cli.changes import rule_from_args
from schemas.messages import ProductChange, ProductState
from schemas.read import AlertRuleIn, AlertRuleOut
from services.notifier.alerts import validate
from services.notifier.rules import matches
from services.notifier.webhook import signature, verify
from shared.errors import ConfigError


def rule(condition: str, threshold: str | None = None, min_change: float = 0.0) -> AlertRuleOut:
    return AlertRuleOut(
        id=1, source="s", condition=condition, threshold=threshold, min_change=min_change
    )  # type: ignore[arg-type]


def price(before: str | None, after: str, kind: str = "price_changed", sale: str | None = None):
    b, a = float(before or 0), float(sale or after)
    percent = round((a - b) / b * 100, 2) if before else None
    return ProductChange(
        id=1,
        source="s",
        kind=kind,  # type: ignore[arg-type]
        key="k",
        before=None if before is None else ProductState(price=before),
        after=ProductState(price=after, sale_price=sale),
        direction=None if percent is None else ("down" if percent < 0 else "up"),
        percent=percent,
        job_id=1,
    )


@pytest.mark.parametrize(
    ("the_rule", "event", "fires"),
    [
        (rule("drop", "10"), price("100", "90"), True),
        (rule("drop", "10"), price("100", "91"), False),
        (rule("drop", "10"), price("100", "120"), False),
        (rule("below", "50"), price("60", "49"), True),
        (rule("below", "50"), price("49", "45"), False),  # already below: no new alert
        (rule("below", "50"), price(None, "45", kind="new"), True),
        (rule("below", "50"), price("60", "60", sale="45"), True),  # the price paid
        (rule("change"), price("10", "10.10"), True),
        (rule("change", min_change=5), price("10", "10.10"), False),
        (rule("back_in_stock"), price("10", "10", kind="back_in_stock"), True),
        (rule("out_of_stock"), price("10", "10", kind="back_in_stock"), False),
        (rule("delisted"), price("10", "10", kind="delisted"), True),
    ],
)
def test_conditions(the_rule: AlertRuleOut, event: ProductChange, fires: bool) -> None:
    assert matches(the_rule, event) is fires


def test_the_readme_command_builds_a_drop_rule() -> None:
    args = build_parser().parse_args(
        ["alerts", "add", "my-shop", "--drop", "10%", "--webhook", "https://hooks.example/x"]
    )
    r = validate(rule_from_args(args))
    assert (r.source, r.condition, r.threshold, r.webhook) == (
        "my-shop",
        "drop",
        "10.0",
        "https://hooks.example/x",
    )
    assert r.debounce_seconds == 3600


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (AlertRuleIn(source="s", condition="drop", webhook="https://h.example/"), "threshold"),
        (AlertRuleIn(source="s", condition="change"), "webhook or an apprise"),
        (AlertRuleIn(source="s", condition="change", webhook="http://h.example/"), "https"),
        (AlertRuleIn(source="s", condition="change", webhook="https://10.0.0.1/"), "private"),
        (
            AlertRuleIn(source="s", condition="change", webhook="https://169.254.169.254/"),
            "metadata",
        ),
        (AlertRuleIn(source="s", condition="change", webhook="file:///etc/passwd"), "scheme"),
    ],
)
def test_a_rule_that_cannot_work_is_refused(bad: AlertRuleIn, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        validate(bad)


def test_signature_round_trip_and_staleness() -> None:
    body = b'{"kind":"price_changed"}'
    now = str(int(time.time()))
    headers = {"Trawl-Timestamp": now, "Trawl-Signature": signature("k", now, body)}
    assert verify("k", headers, body)
    assert not verify("other", headers, body)
    assert not verify("k", headers, body + b" ")
    old = str(int(time.time()) - 3600)
    assert not verify("k", {**headers, "Trawl-Timestamp": old}, body)


# -- rules in a source file (shared.alert_rules, through shared.sources) -----------------------
FILE = """\
name: shop
seeds: [https://shop.example/c]
alerts:
{rules}"""


def load(rules: str):
    from shared.sources import load_source_text

    return load_source_text(FILE.format(rules=rules), filename="s.yaml")


def test_a_file_rule_reads_as_the_cli_would_make_it() -> None:
    from shared.alert_rules import rule_from_spec

    source = load(
        "  - {condition: drop, threshold: 10%, min_change: 2%, debounce: 1d,"
        " webhook: 'https://h.example/${TRAWL_SECRET_PATH}', secret: '${TRAWL_SECRET_KEY}'}\n"
    )
    rule = rule_from_spec(source.name, source.alerts[0])
    args = build_parser().parse_args(
        ["alerts", "add", "shop", "--drop", "10%", "--min-change", "2%", "--debounce", "1d",
         "--webhook", "https://h.example/${TRAWL_SECRET_PATH}", "--secret", "${TRAWL_SECRET_KEY}"]
    )  # fmt: skip
    assert rule == rule_from_args(args)
    assert validate(rule) is rule


@pytest.mark.parametrize(
    ("rules", "error"),
    [
        ("  - {condition: below, webhook: 'https://h.example/x'}\n", "s.yaml:4: alerts[0].thre"),
        ("  - {condition: soon, webhook: 'https://h.example/x'}\n", "alerts[0].condition"),
        ("  - {condition: change}\n", "alerts[0].webhook: give a webhook or an apprise URL"),
        ("  - {condition: change, webhook: 'https://10.1.1.1/x'}\n", "webhook refused"),
        ("  - {condition: change, webhook: 'http://h.example/x'}\n", "must be https"),
        ("  - {condition: change, apprise: 'ntfy://${HOME}'}\n", "only TRAWL_SECRET_"),
        ("  - {condition: change, apprise: 'x://', secret: abc}\n", "reference, not the value"),
        ("  - {condition: drop, threshold: 150%, apprise: 'x://'}\n", "not between 0% and 100%"),
        ("  - {condition: change, apprise: 'x://', debounce: soon}\n", "alerts[0].debounce"),
        ("  - {condition: change, apprise: 'x://', target: k}\n", 'unknown field "target"'),
        (
            "  - {condition: change, apprise: 'x://'}\n  - {condition: change, apprise: 'x://'}\n",
            "s.yaml:5: alerts[1]: the same rule is already alerts[0]",
        ),
    ],
)
def test_a_bad_file_rule_names_its_line_and_field(rules: str, error: str) -> None:
    from shared.errors import SourceError

    with pytest.raises(SourceError, match=re.escape(error)):
        load(rules)


def test_a_webhook_whose_host_is_a_secret_is_checked_at_delivery_only() -> None:
    hidden = AlertRuleIn(source="s", condition="change", webhook="${TRAWL_SECRET_HOOK}")
    assert validate(hidden) is hidden
    in_path = AlertRuleIn(
        source="s", condition="change", webhook="https://10.0.0.1/${TRAWL_SECRET_T}"
    )
    with pytest.raises(ConfigError, match="private"):
        validate(in_path)


async def test_the_notifier_fills_references_from_its_own_environment_only() -> None:
    from types import SimpleNamespace

    from services.notifier.service import Notifier
    from shared.metrics import Metrics
    from shared.secrets import MissingSecret, redact
    from shared.settings import Settings

    settings = Settings.from_env({"TRAWL_SECRET_HOOK": "hidden-path"})
    rt = SimpleNamespace(pool=None, metrics=Metrics.disabled(), settings=settings)
    notifier = Notifier(rt)  # type: ignore[arg-type]
    rule = AlertRuleOut(
        id=7,
        source="s",
        condition="change",
        webhook="https://h.example/${TRAWL_SECRET_HOOK}",
        secret="${TRAWL_SECRET_KEY}",  # not set: the alert cannot be signed
    )
    with pytest.raises(MissingSecret, match="TRAWL_SECRET_KEY is not set"):
        await notifier.deliver(rule, price("10", "9"))
    hidden = notifier._secrets_of(rule)
    assert hidden == ["hidden-path"]
    assert (
        redact("POST https://h.example/hidden-path: 500", hidden)
        == "POST https://h.example/***: 500"
    )
