"""Shapes of messages that changed, as older trawl wrote them, each with ``upgrade()`` to the
current shape. A consumer that cannot decode a message as its channel's type tries these (the
channel table lists them), so messages still in the streams when trawl is upgraded are handled,
not dead-lettered. A shape is retired once no deployment can hold its messages any more.

v1 → v2 (FetchWork, FetchResult, ParseResult): the attempt's identity, copied field by field
through the three messages in v1 (``attempt_id`` as ``"<entry_id>.<n>"``, job, entry, source,
url, kind, depth, keyword, request, previous payload), travels as one nested ``Attempt``.
"""

from __future__ import annotations

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
        return FetchWork(
            attempt=Attempt(
                entry_id=self.entry_id,
                number=self.attempt,
                job_id=self.job_id,
                source=self.source,
                url=self.url,
                kind=self.kind,
                depth=self.depth,
                keyword=self.keyword,
                request=self.request,
                previous_payload_ref=self.previous_payload_ref,
            ),
            domain=self.domain,
            not_before=self.not_before,
            deadline=self.deadline,
            etag=self.etag,
            last_modified=self.last_modified,
            policy=self.policy,
        )


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
        return FetchResult(
            attempt=Attempt(
                entry_id=self.entry_id,
                number=_attempt_number(self.attempt_id),
                job_id=self.job_id,
                source=self.source,
                url=self.url,
                kind=self.kind,
                depth=self.depth,
                keyword=self.keyword,
                request=self.request,
                previous_payload_ref=self.previous_payload_ref,
            ),
            outcome=self.outcome,
            final_url=self.final_url,
            status=self.status,
            error=self.error,
            started_at=self.started_at,
            elapsed_ms=self.elapsed_ms,
            payload_ref=self.payload_ref,
            content_type=self.content_type,
            charset=self.charset,
            size=self.size,
            retry_after=self.retry_after,
            crawl_delay=self.crawl_delay,
            etag=self.etag,
            last_modified=self.last_modified,
            proxy=self.proxy,
            fingerprint=self.fingerprint,
        )


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
        return ParseResult(
            attempt=Attempt(
                entry_id=self.entry_id,
                number=_attempt_number(self.attempt_id),
                job_id=self.job_id,
                source=self.source,
                url=self.url,
                depth=self.depth,
                keyword=self.keyword,
            ),
            payload_ref=self.payload_ref,
            product=self.product,
            links=self.links,
            not_modified=self.not_modified,
            error=self.error,
            products=self.products,
        )


LEGACY: dict[type[Message], tuple[type[FetchWorkV1 | FetchResultV1 | ParseResultV1], ...]] = {
    FetchWork: (FetchWorkV1,),
    FetchResult: (FetchResultV1,),
    ParseResult: (ParseResultV1,),
}
