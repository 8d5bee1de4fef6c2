"""Shapes of messages that changed, as older trawl wrote them, each with ``upgrade()`` to the
current shape. A consumer that cannot decode a message as its channel's type tries these (the
channel table lists them), so messages still in the streams when trawl is upgraded are handled,
not dead-lettered. A shape is retired once no deployment can hold its messages any more.

v1 → v2 (FetchWork, FetchResult, ParseResult): the attempt's identity, copied field by field
through the three messages in v1 (``attempt_id`` as ``"<entry_id>.<n>"``, job, entry, source,
url, kind, depth, keyword, request, previous payload), travels as one nested ``Attempt``.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from schemas.messages import (
    ApiRequest,
    Attempt,
    FetchPolicy,
    FetchResult,
    FetchWork,
    Link,
    LinkKind,
    Message,
    ParseResult,
    Product,
)
from schemas.outcomes import Outcome

_ATTEMPT_FIELDS = frozenset(f.name for f in msgspec.structs.fields(Attempt))
M = TypeVar("M", FetchWork, FetchResult, ParseResult)


def _upgraded(old: Message, new: type[M], *, number: int) -> M:
    """``old`` in the ``new`` shape: its attempt fields gathered into one ``Attempt``, the rest
    carried over by name (a v1 field the new shape lacks, such as ``attempt_id``, is dropped)."""
    fields = msgspec.structs.asdict(old)
    attempt = Attempt(number=number, **{k: v for k, v in fields.items() if k in _ATTEMPT_FIELDS})
    keep = {f.name for f in msgspec.structs.fields(new)} - {"v", "attempt"}
    return new(attempt=attempt, **{k: v for k, v in fields.items() if k in keep})


def _attempt_number(attempt_id: str) -> int:
    number = attempt_id.rpartition(".")[2]
    return int(number) if number.isdigit() else 1


class FetchWorkV1(Message, tag="fetch_work", kw_only=True, frozen=True):
    attempt_id: str
    job_id: int
    entry_id: int
    source: str
    url: str
    domain: str
    kind: LinkKind = "page"
    depth: int = 0
    attempt: int = 1
    keyword: str | None = None
    not_before: float | None = None
    deadline: float | None = None
    etag: str | None = None
    last_modified: str | None = None
    previous_payload_ref: str | None = None
    policy: FetchPolicy = msgspec.field(default_factory=FetchPolicy)
    request: ApiRequest | None = None

    def upgrade(self) -> FetchWork:
        return _upgraded(self, FetchWork, number=self.attempt)


class FetchResultV1(Message, tag="fetch_result", kw_only=True, frozen=True):
    attempt_id: str
    job_id: int
    entry_id: int
    source: str
    url: str
    kind: LinkKind = "page"
    depth: int = 0
    keyword: str | None = None
    outcome: Outcome
    final_url: str | None = None
    status: int | None = None
    error: str | None = None
    started_at: float = 0.0
    elapsed_ms: float = 0.0
    payload_ref: str | None = None
    content_type: str | None = None
    charset: str | None = None
    size: int = 0
    retry_after: float | None = None
    crawl_delay: float | None = None
    etag: str | None = None
    last_modified: str | None = None
    previous_payload_ref: str | None = None
    proxy: str | None = None
    fingerprint: str | None = None
    request: ApiRequest | None = None

    def upgrade(self) -> FetchResult:
        return _upgraded(self, FetchResult, number=_attempt_number(self.attempt_id))


class ParseResultV1(Message, tag="parse_result", kw_only=True, frozen=True):
    attempt_id: str
    job_id: int
    entry_id: int
    source: str
    url: str
    depth: int = 0
    keyword: str | None = None
    payload_ref: str | None = None
    product: Product | None = None
    links: list[Link] = []
    not_modified: bool = False
    error: str | None = None
    products: list[Product] = []

    def upgrade(self) -> ParseResult:
        return _upgraded(self, ParseResult, number=_attempt_number(self.attempt_id))


LEGACY: dict[type[Message], tuple[type[FetchWorkV1 | FetchResultV1 | ParseResultV1], ...]] = {
    FetchWork: (FetchWorkV1,),
    FetchResult: (FetchResultV1,),
    ParseResult: (ParseResultV1,),
}
