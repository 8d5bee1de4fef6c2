"""Identity, live: against the demo shop, one session sends one consistent header set and a 403
makes the retry present another browser; against a TLS + HTTP/2 capture server, the Chrome
profile has real Chromium's JA4 and Akamai fingerprint, a connection carries one identity,
cookies come back, discovered pages carry their Referer, and br and zstd bodies decode."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import brotli
import msgspec
import pytest
import wreq
from aiohttp import web
from backports import zstd

from demo.faults import Faults
from demo.shop import DemoShop
from schemas.messages import FetchWork
from services.fetcher.browser import emulation
from services.fetcher.identity import PROFILES, Identity, identity_for
from tests.support.capture import CaptureServer, Reply, Request, make_ca
from tests.unit.fetcher.loopback import fetcher, serve, work

MB = 1024 * 1024

KEYS = ("User-Agent", "Accept", "Accept-Language", "sec-ch-ua", "sec-ch-ua-platform")


@pytest.fixture
async def shop():
    async with DemoShop(hosts=("127.0.0.2",), port=0, products=8) as s:
        yield s


def _identity(headers: dict[str, str]) -> tuple[str | None, ...]:
    lower = {k.lower(): v for k, v in headers.items()}
    return tuple(lower.get(k.lower()) for k in KEYS)


async def test_one_session_one_identity_and_a_block_changes_it(shop, nc, namespace) -> None:
    pages = [p["url"] for p in shop.truth()[:4]]
    blocked_path = pages[1].removeprefix(shop.base_urls[0])
    shop.faults = Faults(script={blocked_path: [403]})
    async with fetcher(nc, namespace) as f:
        first = [
            await f.fetch(work(url, entry_id=i, locale="de-DE")) for i, url in enumerate(pages)
        ]
        retry = await f.fetch(work(pages[1], entry_id=1, attempt=2, locale="de-DE"))
        other_job = await f.fetch(work(pages[0], job_id=2, entry_id=9, locale="de-DE"))

    assert [r.outcome for r in first] == ["ok", "blocked", "ok", "ok"]
    assert retry.outcome == "ok"
    log = shop.request_log
    session = {_identity(r["headers"]) for r in log[:4]}
    assert len(session) == 1, session  # every request of the session looks the same
    [(ua, _, language, brands, platform)] = session
    assert language == "de-DE,de;q=0.9,en;q=0.8"
    if brands is not None:  # a Chromium profile: its brand list matches its UA's version
        version = ua.split("Chrome/")[1].split(".")[0]
        assert f'v="{version}"' in brands and platform
    assert len({r.fingerprint for r in first}) == 1
    assert retry.fingerprint != first[1].fingerprint
    assert _identity(log[4]["headers"])[0] != ua  # the retry after the block is another browser
    assert other_job.fingerprint is not None


async def test_a_source_can_pin_its_user_agent(shop, nc, namespace) -> None:
    ua = "AcmeCatalogBot/2.1 (+https://acme.example/bot)"
    async with fetcher(nc, namespace) as f:
        for attempt in (1, 2):
            result = await f.fetch(work(shop.base_urls[0] + "/", attempt=attempt, user_agent=ua))
            assert result.outcome == "ok"
    assert [r["headers"]["User-Agent"] for r in shop.request_log] == [ua, ua]


# -- on the wire: TLS, HTTP/2, cookies, navigation, encodings ---------------------------------

REFERENCE = json.loads(
    (Path(__file__).parents[1] / "support" / "fingerprints" / "chromium-156.json").read_text()
)
LOCAL = ["127.0.0.1/32"]  # the capture server answers on localhost


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    ca, cert, key = make_ca(tmp_path_factory.mktemp("tls"))
    return str(ca), cert, key


def _pages(request: Request) -> Reply:
    headers = [("content-type", "text/html; charset=utf-8")]
    if request.path == "/login":  # an anti-bot cookie, set once and expected back
        headers.append(("set-cookie", "__bm=visitor-7; Path=/; Secure; HttpOnly"))
    if request.path.startswith("/br/") or request.path.startswith("/zstd/"):
        size = int(request.path.rsplit("/", 1)[1])
        body = b"<html>" + b"x" * size + b"</html>"
        if request.path.startswith("/br/"):
            return 200, [*headers, ("content-encoding", "br")], brotli.compress(body, quality=4)
        return 200, [*headers, ("content-encoding", "zstd")], zstd.compress(body)
    return 200, headers, f"<html>{request.path}</html>".encode()


def _job_with(prefix: str, domain: str) -> int:
    """A job id whose session, on ``domain``, starts with a profile named ``prefix…``."""
    return next(
        job
        for job in range(1, 500)
        if identity_for(f"{job}:{domain}").id.startswith(prefix)  # as Fetcher.fetch keys it
    )


async def test_chrome_profile_speaks_like_real_chromium(nc, namespace, certs) -> None:
    ca, cert, key = certs
    with CaptureServer(cert, key, _pages) as server:
        base = f"https://localhost:{server.port}"
        job = _job_with("chrome", f"localhost:{server.port}")
        async with fetcher(nc, namespace) as f:
            result = await f.fetch(work(f"{base}/", job_id=job, allow_private=LOCAL, ca_file=ca))
    assert result.outcome == "ok", result.error
    assert result.fingerprint and result.fingerprint.startswith("chrome")
    [connection] = server.connections
    assert connection.alpn == "h2"
    assert connection.ja4 == REFERENCE["ja4"]
    assert connection.akamai == REFERENCE["akamai"]
    [request] = connection.requests
    assert [name for name, _ in request.headers[:4]] == REFERENCE["pseudo_header_order"]


async def test_each_connection_speaks_as_one_identity(nc, namespace, certs) -> None:
    ca, cert, key = certs
    with CaptureServer(cert, key, _pages) as server:
        base = f"https://localhost:{server.port}"
        async with fetcher(nc, namespace) as f:
            # Interleaved: two jobs, each retried after a "block", four pages per session.
            for page in range(4):
                for job in (1, 2):
                    for attempt in (1, 2):
                        result = await f.fetch(
                            work(
                                f"{base}/p/{page}",
                                job_id=job,
                                attempt=attempt,
                                entry_id=page,
                                allow_private=LOCAL,
                                ca_file=ca,
                            )
                        )
                        assert result.outcome == "ok", result.error
    agents = [{r.header("user-agent") for r in c.requests} for c in server.connections]
    assert all(len(a) == 1 for a in agents), agents  # never two identities on one connection
    assert len(set().union(*agents)) >= 2  # and there were several identities
    assert max(len(c.requests) for c in server.connections) == 4  # a session keeps its connection


def _robots_pages(request: Request) -> Reply:
    if request.path == "/robots.txt":
        return 200, [("content-type", "text/plain")], b"User-agent: trawl\nDisallow: /private\n"
    return _pages(request)


async def test_robots_txt_is_asked_for_by_a_browser_not_by_python(nc, namespace, certs) -> None:
    """robots.txt in Python's handshake with "trawl" as its agent, just before the pages in
    Chrome's, would tie the two together for the site: it comes in a browser's handshake too,
    and its rules for trawl are still obeyed."""
    ca, cert, key = certs
    with CaptureServer(cert, key, _robots_pages) as server:
        base = f"https://localhost:{server.port}"
        async with fetcher(nc, namespace) as f:
            private = await f.fetch(
                work(f"{base}/private", robots=True, allow_private=LOCAL, ca_file=ca)
            )
            public = await f.fetch(
                work(f"{base}/p/1", entry_id=2, robots=True, allow_private=LOCAL, ca_file=ca)
            )
    assert private.outcome == "robots_disallowed", private
    assert public.outcome == "ok", public.error
    robots = identity_for(f"robots:{base}")
    [asked] = [c for c in server.connections if c.requests[0].path == "/robots.txt"]
    assert asked.alpn == "h2"  # aiohttp speaks HTTP/1.1 only
    assert asked.requests[0].header("user-agent") == robots.headers["User-Agent"]
    if robots.id.startswith("chrome"):
        assert asked.ja4 == REFERENCE["ja4"]
    assert "/private" not in [r.path for r in server.requests]


async def test_over_http1_the_chrome_profile_orders_headers_as_chromium(nc, namespace) -> None:
    """HTTP/1.1 shows what HTTP/2 hides: Host first, Connection, and Chromium's own order (an
    image's is not a page's). Compared with real Chromium's, captured on a plain server."""
    heads: dict[str, list[str]] = {}

    async def handler(request: web.BaseRequest) -> web.Response:
        heads[request.path] = [bytes(name).decode() for name, _ in request.raw_headers]
        return web.Response(body=b"<html></html>", content_type="text/html")

    async with serve(handler) as base:
        job = _job_with("chrome", base.removeprefix("http://"))
        page = work(f"{base}/", job_id=job)
        image = work(f"{base}/pixel.png", job_id=job, entry_id=2, accept_types=["image/png"])
        image = msgspec.structs.replace(
            image,
            attempt=msgspec.structs.replace(image.attempt, kind="image", referrer=f"{base}/"),
        )
        async with fetcher(nc, namespace) as f:
            assert (await f.fetch(page)).outcome == "ok"
            await f.fetch(image)
    assert heads["/"] == REFERENCE["http1_header_order"]
    assert heads["/pixel.png"] == REFERENCE["http1_image_header_order"]


async def test_cookies_come_back_within_the_session_only(nc, namespace, certs) -> None:
    ca, cert, key = certs
    with CaptureServer(cert, key, _pages) as server:
        base = f"https://localhost:{server.port}"
        async with fetcher(nc, namespace) as f:
            for entry, path in enumerate(("/login", "/p/1", "/p/2")):
                await f.fetch(work(base + path, entry_id=entry, allow_private=LOCAL, ca_file=ca))
            other = await f.fetch(work(base + "/p/3", job_id=9, allow_private=LOCAL, ca_file=ca))
    assert other.outcome == "ok"
    cookies = [r.header("cookie") for r in server.requests]
    assert cookies == [None, "__bm=visitor-7", "__bm=visitor-7", None]


async def test_a_discovered_page_carries_its_referrer(nc, namespace, certs) -> None:
    ca, cert, key = certs
    with CaptureServer(cert, key, _pages) as server:
        base = f"https://localhost:{server.port}"
        listing = f"{base}/list?page=2"

        def job(url: str, entry_id: int, referrer: str | None = None, **kw: str) -> FetchWork:
            item = work(url, entry_id=entry_id, allow_private=LOCAL, ca_file=ca)
            attempt = msgspec.structs.replace(item.attempt, referrer=referrer, **kw)
            return msgspec.structs.replace(item, attempt=attempt)

        async with fetcher(nc, namespace) as f:
            seed = await f.fetch(job(f"{base}/", entry_id=1))
            product = await f.fetch(job(f"{base}/p/7", entry_id=2, referrer=listing + "#top"))
            image = await f.fetch(
                job(f"{base}/img/7.jpg", entry_id=3, referrer=f"{base}/p/7", kind="image")
            )
            other = await f.fetch(
                job(f"{base}/p/8", entry_id=4, referrer="https://elsewhere.example/")
            )
    assert [r.outcome for r in (seed, product, image, other)] == ["ok"] * 4
    seen = {r.path: r for r in server.requests}
    assert seen["/"].header("sec-fetch-site") == "none" and seen["/"].header("referer") is None
    assert seen["/p/7"].header("referer") == listing  # the full page URL, without its fragment
    assert seen["/p/7"].header("sec-fetch-site") == "same-origin"
    assert seen["/p/7"].header("sec-fetch-mode") == "navigate"
    assert seen["/p/7"].header("sec-fetch-dest") == "document"
    assert seen["/img/7.jpg"].header("referer") == f"{base}/p/7"
    assert seen["/img/7.jpg"].header("sec-fetch-dest") == "image"
    assert seen["/img/7.jpg"].header("sec-fetch-site") == "same-origin"
    assert seen["/p/8"].header("sec-fetch-site") == "cross-site"
    assert seen["/p/8"].header("referer") == "https://elsewhere.example/"  # origin only


async def test_br_and_zstd_bodies_decode_under_the_cap(nc, namespace, certs) -> None:
    ca, cert, key = certs
    with CaptureServer(cert, key, _pages) as server:
        base = f"https://localhost:{server.port}"
        async with fetcher(nc, namespace) as f:
            results = {
                path: await f.fetch(
                    work(base + path, entry_id=i, allow_private=LOCAL, ca_file=ca, max_bytes=MB)
                )
                for i, path in enumerate(
                    ("/br/50000", "/zstd/50000", "/br/20000000", "/zstd/20000000")
                )
            }
            bodies = {
                p: await f.store.get(r.payload_ref) for p, r in results.items() if r.payload_ref
            }
    offered = {r.header("accept-encoding") for r in server.requests}
    assert len(offered) == 1 and "br" in (offered.pop() or "")
    for path in ("/br/50000", "/zstd/50000"):
        assert results[path].outcome == "ok", results[path].error
        assert bodies[path] == b"<html>" + b"x" * 50000 + b"</html>"
    for path in ("/br/20000000", "/zstd/20000000"):  # a few KB on the wire, 20 MB unpacked
        assert results[path].outcome == "rejected", results[path]
        assert "exceeds" in (results[path].error or "")


async def test_certificates_are_verified_against_the_trust_given(
    nc, namespace, certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, cert, key = certs
    with CaptureServer(cert, key, _pages) as server:
        url = f"https://localhost:{server.port}/"
        async with fetcher(nc, namespace) as f:
            untrusted = await f.fetch(work(url, job_id=1, allow_private=LOCAL))
            per_source = await f.fetch(work(url, job_id=2, allow_private=LOCAL, ca_file=ca))
            monkeypatch.setenv("SSL_CERT_FILE", str(ca))
            from_env = await f.fetch(work(url, job_id=3, allow_private=LOCAL))
    assert untrusted.outcome == "network_error", untrusted
    assert per_source.outcome == "ok", per_source.error
    assert from_env.outcome == "ok", from_env.error


async def test_plain_mode_is_an_honest_python_client(nc, namespace, certs) -> None:
    ca, cert, key = certs
    with CaptureServer(cert, key, _pages) as server:
        url = f"https://localhost:{server.port}/"
        async with fetcher(nc, namespace) as f:
            result = await f.fetch(work(url, allow_private=LOCAL, ca_file=ca, client="plain"))
    assert result.outcome == "ok", result.error
    [connection] = server.connections
    assert connection.alpn in (None, "http/1.1") and connection.ja4 != REFERENCE["ja4"]
    [request] = connection.requests
    assert request.header("accept-encoding") == "gzip, deflate"  # only what aiohttp decodes


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.id)
async def test_identity_headers_are_the_librarys_own(profile) -> None:
    """Our header sets equal what the transport library sends for the same profile, so a
    library upgrade that moves a browser's headers fails here rather than on a site."""
    seen: list[list[tuple[str, str]]] = []

    async def record(request: web.BaseRequest) -> web.Response:
        seen.append([(k.decode().lower(), v.decode()) for k, v in request.raw_headers])
        return web.Response(text="ok")

    library = emulation(Identity(id=profile.id, headers={}, tls=profile.tls), headers=True)
    client = wreq.Client(emulation=library, no_proxy=True)
    ours = next(
        i for g in range(len(PROFILES)) if (i := identity_for("s", generation=g)).id == profile.id
    )
    async with serve(record) as base, await client.get(base + "/"):
        pass
    theirs = [(k, v) for k, v in seen[0] if k != "host"]
    assert theirs == [(k.lower(), v) for k, v in ours.headers.items()]


async def test_cookies_follow_the_session_to_another_replica_and_nowhere_else(
    nc, namespace, certs, caplog: pytest.LogCaptureFixture
) -> None:
    ca, cert, key = certs
    caplog.set_level(logging.DEBUG, logger="trawl")
    with CaptureServer(cert, key, _pages) as server:
        base = f"https://localhost:{server.port}"
        async with fetcher(nc, namespace) as one, fetcher(nc, namespace) as two:
            login = await one.fetch(work(base + "/login", allow_private=LOCAL, ca_file=ca))
            later = await two.fetch(work(base + "/p/1", allow_private=LOCAL, ca_file=ca))
            blocked = await two.fetch(
                work(base + "/p/1", attempt=2, allow_private=LOCAL, ca_file=ca)
            )
    assert [r.outcome for r in (login, later, blocked)] == ["ok"] * 3
    cookies = [r.header("cookie") for r in server.requests]
    # The second replica continues the visit; the retry after a block is a new visitor.
    assert cookies == [None, "__bm=visitor-7", None]
    assert server.requests[0].connection != server.requests[1].connection
    for result in (login, later, blocked):
        assert b"visitor-7" not in msgspec.json.encode(result)
    logged = [r for r in caplog.records if r.name.startswith("trawl")]
    assert logged and not [r for r in logged if "visitor-7" in repr(vars(r))]
