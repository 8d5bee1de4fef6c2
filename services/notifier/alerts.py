"""Checking a new alert rule before it is stored (the API and the CLI call it): a condition
with the threshold it needs, somewhere to deliver, and a webhook the SSRF guard accepts."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from schemas.read import AlertRuleIn
from services.notifier.webhook import check_webhook
from shared.errors import ConfigError, SourceError
from shared.guard import Allowlist, UnsafeURL


def validate(rule: AlertRuleIn) -> AlertRuleIn:
    """``rule`` if it can work, else ``ConfigError`` saying why."""
    if rule.condition in ("below", "drop"):
        if rule.threshold is None:
            raise ConfigError(f"a {rule.condition} rule needs a threshold")
        try:
            value = Decimal(rule.threshold)
        except InvalidOperation:
            raise ConfigError(f"threshold {rule.threshold!r} is not a number") from None
        if not value.is_finite() or value <= 0:
            raise ConfigError(f"threshold {rule.threshold!r} must be above 0")
    if not rule.webhook and not rule.apprise:
        raise ConfigError("give a webhook or an apprise URL to deliver to")
    if rule.debounce_seconds < 0:
        raise ConfigError("debounce must be 0 or more seconds")
    try:
        Allowlist.from_policy(list(rule.allow_private))
        if rule.webhook:
            check_webhook(rule.webhook, list(rule.allow_private))
    except (UnsafeURL, SourceError) as exc:
        raise ConfigError(f"webhook refused: {exc}") from None
    return rule
