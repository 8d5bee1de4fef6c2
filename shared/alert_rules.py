"""What an alert rule must be, checked in one place for every way of making one: ``trawl alerts
add`` and ``/api/alerts`` (``services.notifier.alerts.validate``) and the ``alerts:`` of a
source file (``shared.sources``, which names the line and the field).

A rule needs the threshold its condition needs, somewhere to deliver, and a webhook the SSRF
guard accepts by shape. Webhook, Apprise URL and secret may reference ``${TRAWL_SECRET_*}``
variables, filled in by the notifier when it delivers (``shared.secrets``); a webhook whose
host is a reference is checked at delivery only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal, InvalidOperation

from schemas.read import AlertRuleIn
from schemas.source import AlertSpec
from shared.errors import ConfigError, SourceError
from shared.guard import Allowlist, UnsafeURL, check_target
from shared.secrets import PREFIX, REF, foreign

_AGO = re.compile(r"(\d+)\s*([smhd])")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}

MAX_THRESHOLD = Decimal(10) ** 12  # what the numeric column and any price stay under
MAX_DEBOUNCE = 366 * 86400

# (field of AlertRuleIn, what is wrong)
Problem = tuple[str, str]


def percent(raw: str | float, what: str) -> float:
    """``10%``, ``"10"`` or ``10``: a percentage in 0..100."""
    try:
        value = float(raw.strip().removesuffix("%")) if isinstance(raw, str) else float(raw)
    except ValueError:
        raise ConfigError(f"{what}: expected a percentage like 10%, got {raw!r}") from None
    if not 0 <= value <= 100:
        raise ConfigError(f"{what}: {raw} is not between 0% and 100%")
    return value


def seconds(raw: str | int, what: str) -> int:
    """``30m``, ``1h``, ``1d`` (or a number of seconds): a duration in seconds."""
    if isinstance(raw, int):
        return raw
    if m := _AGO.fullmatch(raw.strip()):
        return int(timedelta(**{_UNIT[m[2]]: int(m[1])}).total_seconds())
    raise ConfigError(f"{what}: expected a duration like 30m, 1h or 1d, got {raw!r}")


def check_webhook(url: str, allow_private: list[str]) -> None:
    """Refuse a webhook target before it is stored or called (raises ``UnsafeURL``)."""
    parsed = check_target(url, Allowlist.from_policy(allow_private))
    if parsed.scheme != "https" and not allow_private:
        raise UnsafeURL("a webhook must be https (plain http only to a network it allows)")


def _shape(url: str) -> str | None:
    """The webhook to check by shape: references replaced by a placeholder, or None when one
    sits in the scheme or host (then only delivery, after filling it in, can check it)."""
    first = REF.search(url)
    if first is None:
        return url
    _scheme, sep, rest = url[: first.start()].partition("://")
    if not sep or "/" not in rest:
        return None
    return REF.sub("x", url)


def problems(rule: AlertRuleIn) -> Iterator[Problem]:
    if rule.condition in ("below", "drop"):
        if rule.threshold is None:
            yield "threshold", f"a {rule.condition} rule needs a threshold"
        else:
            try:
                value = Decimal(rule.threshold)
            except InvalidOperation:
                yield "threshold", f"threshold {rule.threshold!r} is not a number"
            else:
                if not value.is_finite() or value <= 0:
                    yield "threshold", f"threshold {rule.threshold!r} must be above 0"
                elif value > MAX_THRESHOLD:
                    yield "threshold", f"threshold {rule.threshold!r} is beyond any price"
    if not rule.webhook and not rule.apprise:
        yield "webhook", "give a webhook or an apprise URL to deliver to"
    if not 0 <= rule.debounce_seconds <= MAX_DEBOUNCE:
        yield "debounce_seconds", "debounce must be 0 seconds to 366 days"
    for name in ("webhook", "secret", "apprise"):
        if bad := foreign(getattr(rule, name) or ""):
            yield name, f"${{{bad[0]}}}: only {PREFIX}* variables can be referenced"
    try:
        Allowlist.from_policy(list(rule.allow_private))
    except (UnsafeURL, SourceError) as exc:
        yield "allow_private", f"webhook refused: {exc}"
        return
    shape = _shape(rule.webhook) if rule.webhook else None
    if shape is not None:
        try:
            check_webhook(shape, list(rule.allow_private))
        except (UnsafeURL, SourceError) as exc:
            yield "webhook", f"webhook refused: {exc}"


# -- rules written in a source file ------------------------------------------------------------

# AlertRuleIn's field → the file's name for it (the others are spelled alike).
SPEC_FIELD = {
    "product_key": "product",
    "variant_key": "variant",
    "debounce_seconds": "debounce",
}


def rule_from_spec(source: str, spec: AlertSpec) -> AlertRuleIn:
    """The rule a source file's entry describes (``ConfigError`` when a percentage or a
    duration does not read)."""
    threshold = spec.threshold
    if spec.condition == "drop" and threshold is not None:
        threshold = percent(threshold, "threshold")
    return AlertRuleIn(
        source=source,
        condition=spec.condition,
        threshold=None if threshold is None else str(threshold),
        product_key=spec.product,
        variant_key=spec.variant,
        gtin=spec.gtin,
        min_change=percent(spec.min_change, "min_change"),
        debounce_seconds=seconds(spec.debounce, "debounce"),
        webhook=spec.webhook,
        secret=spec.secret,
        apprise=spec.apprise,
        allow_private=list(spec.allow_private),
    )


def spec_problems(source: str, spec: AlertSpec) -> Iterator[Problem]:
    """What is wrong with a source file's rule, by the file's field names. Its secret must be
    a reference: the stored definition is shown by ``trawl source show`` and the API."""
    if spec.secret is not None and not REF.fullmatch(spec.secret.strip()):
        yield "secret", f"write the secret as a ${{{PREFIX}NAME}} reference, not the value"
    unreadable = False
    for name in ("threshold", "min_change", "debounce"):
        value = getattr(spec, name)
        try:
            if name == "debounce":
                seconds(value, name)
            elif value is not None and (name == "min_change" or spec.condition == "drop"):
                percent(value, name)
        except ConfigError as exc:
            unreadable = True
            yield name, str(exc).removeprefix(f"{name}: ")
    if unreadable:
        return
    for name, message in problems(rule_from_spec(source, spec)):
        yield SPEC_FIELD.get(name, name), message
