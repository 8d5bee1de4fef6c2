"""The OpenAPI 3.1 document, built from the route table and the msgspec types it names, so it
cannot drift from what the server routes."""

from __future__ import annotations

from typing import Any

import msgspec

from control.api.problems import PROBLEM_TYPE, ProblemBody
from control.api.routes import Route, path_params
from shared.service import VERSION

REF = "#/components/schemas/{name}"
REASONS = {
    400: "Bad request",
    401: "Missing or wrong bearer token",
    403: "The read-only token cannot change anything",
    404: "Not found",
    409: "Conflict with the object's state",
    422: "Invalid body",
    501: "Needs an optional extra that is not installed",
    503: "Unavailable",
}


def build_document(routes: list[Route]) -> dict[str, Any]:
    # Collect every msgspec type once; schema_components gives shared components + refs.
    types: list[Any] = [ProblemBody]
    for r in routes:
        types += [t for t in (r.body, r.response) if t is not None]
        types += [t for _, t in r.other]
    refs, components = msgspec.json.schema_components(types, ref_template=REF)
    schema_of = dict(zip(map(_key, types), refs, strict=True))
    problem = {PROBLEM_TYPE: {"schema": schema_of[_key(ProblemBody)]}}

    paths: dict[str, dict[str, Any]] = {}
    for r in routes:
        paths.setdefault(r.path, {})[r.method.lower()] = _operation(r, schema_of, problem)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "trawl admin API",
            "version": VERSION,
            "description": "Jobs, sources, schedules, payloads, products, domains, proxies, "
            "workers and dead letters of one trawl namespace.",
        },
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


def _key(tp: Any) -> str:
    return repr(tp)


def _operation(r: Route, schema_of: dict[str, Any], problem: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": r.op_id, "summary": r.summary, "tags": [r.tag]}
    declared = {p.name for p in r.params if p.location == "path"}
    missing = set(path_params(r.path)) - declared
    if missing:
        raise ValueError(f"{r.method} {r.path}: undocumented path parameters {missing}")
    if r.params:
        op["parameters"] = [
            {
                "name": p.name,
                "in": p.location,
                "required": p.required or p.location == "path",
                "schema": p.schema,
                **({"description": p.description} if p.description else {}),
            }
            for p in r.params
        ]
    if r.body is not None:
        content = {"application/json": {"schema": schema_of[_key(r.body)]}}
        for mime in r.extra_body_types:
            content[mime] = {"schema": {}}  # text in another notation: any body is text
        op["requestBody"] = {"required": r.body_required, "content": content}
    responses: dict[str, Any] = {}
    if r.content_type != "application/json":
        responses[str(r.status)] = {
            "description": "OK",
            "content": {r.content_type: {"schema": {"type": "string"}}},
        }
    elif r.response is None:
        responses["204"] = {"description": "Done"}
    else:
        responses[str(r.status)] = {
            "description": "OK",
            "content": {"application/json": {"schema": schema_of[_key(r.response)]}},
        }
    for status, tp in r.other:
        responses[str(status)] = {
            "description": REASONS.get(status, "OK"),
            "content": {"application/json": {"schema": schema_of[_key(tp)]}},
        }
    errors = set(r.errors)
    if not r.public:
        errors |= {401} | ({403} if r.write else set())
    if r.params or r.body is not None:
        errors |= {400}
    for status in sorted(errors):
        responses.setdefault(
            str(status), {"description": REASONS.get(status, "Error"), "content": problem}
        )
    responses["500"] = {"description": "Unexpected error", "content": problem}
    op["responses"] = responses
    if r.public:
        op["security"] = []
    return op
