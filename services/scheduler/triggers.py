"""Triggers: a request to crawl a source becomes a job (or joins the source's running job).

A trigger can arrive twice: through the durable trigger stream and, when it was sent as a NATS
request, through the scheduler's core subscription that answers it. Both paths call
``start_job`` with the same digest, and the ``triggers`` table makes the second a no-op.
"""

from __future__ import annotations

import hashlib
import time
from urllib.parse import urlsplit

import msgspec

from schemas.messages import Trigger, TriggerReply
from schemas.source import Source
from services.scheduler import store
from services.scheduler.frontier import Admission, Candidate
from services.scheduler.priority import job_boost
from services.scheduler.store import Conn
from shared.api_template import first_request, uses
from shared.errors import Poison
from shared.sources import effective_allowed_domains, source_from_dict, source_to_dict


def trigger_digest(trigger: Trigger, raw: bytes) -> str:
    if trigger.id:
        return f"id:{trigger.id}"
    # Without an id, identical bytes within the same minute are the same trigger.
    return f"sha:{hashlib.sha256(raw).hexdigest()}:{int(time.time() // 60)}"


def seed_candidates(trigger: Trigger, source: Source) -> list[Candidate]:
    seeds = [Candidate(u, "seed") for u in (trigger.seeds or source.seeds)]
    keywords = list(trigger.keywords) or (list(source.search.keywords) if source.search else [])
    seeds += [Candidate(u, "sitemap") for u in sitemap_urls(source)]
    if source.search and keywords:
        from urllib.parse import quote_plus

        seeds += [
            Candidate(source.search.url.replace("{keyword}", quote_plus(k)), "search", keyword=k)
            for k in keywords
        ]
    return seeds + api_candidates(trigger, source)


def api_candidates(trigger: Trigger, source: Source) -> list[Candidate]:
    """The first page of the source's API listing; one per keyword when the template uses
    ``{keyword}`` (the trigger's keywords, else the api's, else the search's)."""
    api = source.api
    if api is None or api.url is None or trigger.seeds:
        return []  # explicit seeds mean "crawl these"
    if not uses(api, "keyword"):
        url, request = first_request(api)
        return [Candidate(url, "seed", request=request)]
    keywords = list(trigger.keywords) or list(api.keywords)
    if not keywords and source.search:
        keywords = list(source.search.keywords)
    out = []
    for k in keywords:
        url, request = first_request(api, keyword=k)
        out.append(Candidate(url, "search", keyword=k, request=request))
    return out


def sitemap_urls(source: Source) -> list[str]:
    """The source's sitemaps; ``robots`` means each seed origin's robots.txt, whose
    ``Sitemap:`` lines the parser turns into sitemap links."""
    if source.sitemaps != "robots":
        return list(source.sitemaps)
    origins = []
    for url in source.seeds:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}/robots.txt"
        if origin not in origins:
            origins.append(origin)
    return origins


async def start_job(conn: Conn, trigger: Trigger, digest: str) -> tuple[TriggerReply, bool]:
    """Create (or join) the job; returns the reply and whether a new job was created.

    Raises ``Poison`` for a trigger that can never succeed (unknown source, no seeds).
    """
    async with conn.transaction():
        if not await store.jobs.claim_trigger(conn, digest):
            job_id = await store.jobs.trigger_job(conn, digest)
            return TriggerReply(job_id=job_id, existing=True), False

        definition = await store.sources.definition(conn, trigger.source)
        if definition is None:
            raise Poison(f"unknown source {trigger.source!r} (apply it with `trawl source apply`)")
        source = source_from_dict(definition)
        if trigger.kind == "verify":
            return await _start_verify_job(conn, trigger, source, digest), True
        candidates = seed_candidates(trigger, source)
        # An API listing re-reads the whole catalog; its products' URLs are HTML pages that
        # would only add requests (and a page product the listing already covers).
        if trigger.kind == "refresh" and not trigger.seeds and not (source.api and source.api.url):
            # A refresh re-visits every product it knows (so delisted ones can count misses
            # and come back), besides the listings that discover new ones.
            known = await store.jobs.known_product_urls(conn, trigger.source)
            candidates += [Candidate(url, "product") for url in known]
        admission = Admission(source, effective_allowed_domains(source))
        if not any(admission.accept(c.url, 0, api=c.request is not None) for c in candidates):
            raise Poison(f"source {trigger.source!r}: no usable seed URL in this trigger")

        boost = job_boost(trigger.priority, trigger.requested_by)
        running = await store.jobs.running_of_source(conn, trigger.source, lock=True)
        created = running is None
        partial = bool(trigger.seeds or trigger.keywords)
        if running is None:
            job_id = await store.jobs.insert(
                conn,
                source=trigger.source,
                kind=trigger.kind,
                priority=trigger.priority,
                keywords=list(trigger.keywords),
                requested_by=trigger.requested_by,
                definition=source_to_dict(source),
                partial=partial,
            )
        else:
            job_id = running
            if not partial:  # the whole source joins: the job is no longer narrowed
                await store.jobs.widen(conn, job_id)
        await admission.admit(conn, job_id, candidates, boost=boost, set_policy=True)
        await store.jobs.set_trigger_job(conn, digest, job_id)
        return TriggerReply(job_id=job_id, existing=not created), created


def verify_source(source: Source) -> Source:
    """The source as a verify job runs it: only its seeds (the candidates' pages), no link
    followed (``max_depth`` 0) and no image fetched; pacing, robots.txt, proxies and the SSRF
    guard as the source has them."""
    links = msgspec.structs.replace(source.links, max_depth=0)
    return msgspec.structs.replace(source, links=links, images=False)


async def _start_verify_job(
    conn: Conn, trigger: Trigger, source: Source, digest: str
) -> TriggerReply:
    """A re-check of change candidates (the refresher's trigger, ``seeds`` their pages): always
    a job of its own, beside the source's running crawl, partial (it counts no misses), and
    ahead of the crawl's waiting work on the same domains (the trigger's priority)."""
    source = verify_source(source)
    candidates = [Candidate(u, "product") for u in trigger.seeds]
    admission = Admission(source, effective_allowed_domains(source))
    if not any(admission.accept(c.url, 0) for c in candidates):
        raise Poison(f"source {trigger.source!r}: no usable URL to verify in this trigger")
    job_id = await store.jobs.insert(
        conn,
        source=trigger.source,
        kind="verify",
        priority=trigger.priority,
        keywords=[],
        requested_by=trigger.requested_by,
        definition=source_to_dict(source),
        partial=True,
    )
    boost = job_boost(trigger.priority, trigger.requested_by)
    await admission.admit(conn, job_id, candidates, boost=boost, set_policy=False)
    await store.jobs.set_trigger_job(conn, digest, job_id)
    return TriggerReply(job_id=job_id)
