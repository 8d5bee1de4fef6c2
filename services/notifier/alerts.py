"""Checking a new alert rule before it is stored (the API and the CLI call it): the checks
themselves are ``shared.alert_rules``', which a source file's rules go through too."""

from __future__ import annotations

from schemas.read import AlertRuleIn
from shared.alert_rules import problems
from shared.errors import ConfigError


def validate(rule: AlertRuleIn) -> AlertRuleIn:
    """``rule`` if it can work, else ``ConfigError`` saying why."""
    for _field, message in problems(rule):
        raise ConfigError(message)
    return rule
