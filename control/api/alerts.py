"""Alert rules (issue 18): the notifier's ``alert_rules``, managed like the CLI's ``trawl alerts``.

A rule's secret (the webhook's HMAC key) is shown once, in the answer to its creation; the
listing, which the read token may see, leaves it out. Rules written in a source file
(``origin: "source"``) are listed too, and changed only by applying the file again.
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from control.api.problems import Problem
from control.api.routes import ID, Param, Route, path_id, pool_of, query_str, read_body, respond
from schemas.read import AlertRuleIn, AlertRuleOut
from services.notifier import store
from services.notifier.alerts import validate
from shared.errors import ConfigError


async def list_rules(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        rules = await store.list_rules(conn, query_str(request, "source"))
    return respond([msgspec.structs.replace(r, secret="") for r in rules])


async def create_rule(request: web.Request) -> web.Response:
    body: AlertRuleIn = await read_body(request, AlertRuleIn)
    try:
        rule = validate(body)
    except ConfigError as exc:
        raise Problem(422, "Unprocessable Content", str(exc)) from None
    async with pool_of(request).acquire() as conn:
        out = await store.add_rule(conn, rule)
    return respond(out, 201)


async def delete_rule(request: web.Request) -> web.Response:
    rule_id = path_id(request, "rule_id")
    async with pool_of(request).acquire() as conn:
        try:
            deleted = await store.delete_rule(conn, rule_id)
        except ConfigError as exc:  # a source file's rule: the file says what it is
            raise Problem(409, "Conflict", str(exc)) from None
    if not deleted:
        raise Problem(404, "Not Found", f"no alert rule {rule_id}")
    return respond(None)


ROUTES = [
    Route(
        "GET",
        "/api/alerts",
        list_rules,
        "List alert rules",
        "alerts",
        params=(Param("source", {"type": "string"}),),
        response=list[AlertRuleOut],
    ),
    Route(
        "POST",
        "/api/alerts",
        create_rule,
        "Create an alert rule",
        "alerts",
        body=AlertRuleIn,
        response=AlertRuleOut,
        status=201,
        errors=(400, 422),
    ),
    Route(
        "DELETE",
        "/api/alerts/{rule_id}",
        delete_rule,
        "Delete an alert rule",
        "alerts",
        params=(Param("rule_id", ID, "rule id", True, "path"),),
        errors=(404, 409),
    ),
]
