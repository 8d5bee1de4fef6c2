"""API request templates: a source's ``api`` section → the concrete requests of its listing.

The scheduler renders the first page of each listing; the parser renders the next page from
the one it just parsed (the request travels with the work and comes back with the result, so
no service keeps pagination state). ``{page}``, ``{per_page}``, ``{offset}``, ``{cursor}`` and
``{keyword}`` are filled in the URL, the headers, a JSON body and GraphQL variables; a JSON
string that is exactly one placeholder becomes the value itself (``"{page}"`` → ``2``).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any
from urllib.parse import quote

import msgspec

from schemas.messages import ApiRequest
from schemas.source import Api

PLACEHOLDERS = ("page", "per_page", "offset", "cursor", "keyword")
PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)\}")


def method(api: Api) -> str:
    return "POST" if api.graphql is not None else api.method


def template_strings(api: Api) -> list[str]:
    """Every string placeholders may appear in (not the GraphQL query: it is all braces)."""
    out = [api.url or "", *api.headers.values()]
    out += _strings(api.body) + _strings(api.graphql.variables if api.graphql else None)
    return out


def uses(api: Api, name: str) -> bool:
    return any(f"{{{name}}}" in s for s in template_strings(api))


def render(
    api: Api,
    *,
    page: int | None = None,
    offset: int | None = None,
    cursor: str | None = None,
    keyword: str | None = None,
    items_before: int = 0,
    pages: int = 1,
) -> tuple[str, ApiRequest]:
    """The URL and request of one page."""
    values: dict[str, Any] = {
        "page": page,
        "per_page": api.pagination.per_page,
        "offset": offset,
        "cursor": cursor,
        "keyword": keyword,
    }
    url = _fill(api.url or "", values, quote_values=True)
    body: str | None = None
    if api.graphql is not None:
        variables = _fill_json(api.graphql.variables, values)
        body = _dumps({"query": api.graphql.query, "variables": variables})
    elif api.body is not None:
        body = _dumps(_fill_json(api.body, values))
    headers = {k: _fill(v, values) for k, v in api.headers.items()}
    request = ApiRequest(
        method=method(api),
        body=body,
        headers=headers,
        page=page,
        offset=offset,
        cursor=cursor,
        items_before=items_before,
        pages=pages,
    )
    return url, request


def first_request(api: Api, keyword: str | None = None) -> tuple[str, ApiRequest]:
    p = api.pagination
    if p.strategy == "page":
        return render(api, page=p.start, keyword=keyword)
    if p.strategy == "offset":
        return render(api, offset=p.start, keyword=keyword)
    return render(api, keyword=keyword)


def next_request(
    api: Api,
    current: ApiRequest,
    *,
    items: int,
    cursor: str | None = None,
    keyword: str | None = None,
) -> tuple[str, ApiRequest]:
    """The page after ``current``, which held ``items`` items (and named ``cursor``)."""
    p = api.pagination
    before, pages = current.items_before + items, current.pages + 1
    if p.strategy == "page":
        page = (p.start if current.page is None else current.page) + 1
        return render(api, page=page, keyword=keyword, items_before=before, pages=pages)
    if p.strategy == "offset":
        offset = (p.start if current.offset is None else current.offset) + p.per_page
        return render(api, offset=offset, keyword=keyword, items_before=before, pages=pages)
    return render(api, cursor=cursor, keyword=keyword, items_before=before, pages=pages)


def request_key(request: ApiRequest | None) -> str:
    """What tells apart entries of one URL: '' for a plain GET, else a hash of method + body."""
    if request is None or (request.method == "GET" and request.body is None):
        return ""
    digest = hashlib.sha256(f"{request.method}\n{request.body or ''}".encode())
    return digest.hexdigest()[:16]


def decode_request(value: Any) -> ApiRequest | None:
    """An entry's ``request`` column (jsonb: decoded by the pool's codec, or still text)."""
    if value is None:
        return None
    if isinstance(value, str | bytes):
        return msgspec.json.decode(value, type=ApiRequest)
    return msgspec.convert(value, ApiRequest)


def _dumps(value: Any) -> str:
    # Stable bytes: the same request always hashes to the same entry key.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _fill(text: str, values: dict[str, Any], *, quote_values: bool = False) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            return m.group(0)
        value = values[name]
        text = "" if value is None else str(value)
        return quote(text, safe="") if quote_values else text

    return PLACEHOLDER.sub(sub, text)


def _fill_json(value: Any, values: dict[str, Any]) -> Any:
    if isinstance(value, str):
        whole = PLACEHOLDER.fullmatch(value)
        if whole and whole.group(1) in values:
            return values[whole.group(1)]
        return _fill(value, values)
    if isinstance(value, dict):
        return {k: _fill_json(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_json(v, values) for v in value]
    return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
