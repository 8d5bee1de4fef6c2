"""A gzip response is stored as the server sent it, and read back as the same body; anything
else (another encoding, none, a member followed by more bytes) is stored as gzip made here; a
broken or cut gzip body is the request's network error, as the transport's decoder made it."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
from aiohttp import web

from shared.names import Names
from tests.unit.fetcher.loopback import fetcher, serve, work

BODY = b"<html><body>" + b"<p>a product page, say</p>" * 2000 + b"</body></html>"
MEMBER = gzip.compress(BODY, compresslevel=1, mtime=123)  # not what the store would make

ENCODED: dict[str, tuple[bytes, str]] = {
    "gzip": (MEMBER, "gzip"),
    "br": (brotli.compress(BODY), "br"),
    "deflate": (zlib.compress(BODY), "deflate"),
    "identity": (BODY, ""),
    # What the transport's decoder did: the first member is the body, the rest is ignored.
    "two-members": (MEMBER + gzip.compress(b"<p>more</p>"), "gzip"),
    "trailing": (MEMBER + b"junk", "gzip"),
    "cut": (MEMBER[: len(MEMBER) // 2], "gzip"),
    "corrupt": (MEMBER[:40] + bytes(60) + MEMBER[100:], "gzip"),
    "bad-crc": (MEMBER[:-8] + b"\0\0\0\0" + MEMBER[-4:], "gzip"),
}


async def _encoded(request: web.BaseRequest) -> web.Response:
    data, encoding = ENCODED[request.path.strip("/")]
    headers = {"Content-Type": "text/html; charset=utf-8"}
    if encoding:
        headers["Content-Encoding"] = encoding
    return web.Response(body=data, headers=headers)


async def _stored(nc, namespace: str, ref: str) -> bytes:
    names = Names(namespace)
    raw = await nc.jetstream().get_last_msg(names.payload_stream, names.payload(ref[3:]))
    return bytes(raw.data)


async def test_a_gzip_body_is_stored_as_sent_and_reads_back_the_same(nc, namespace) -> None:
    async with serve(_encoded) as base, fetcher(nc, namespace) as f:
        result = await f.fetch(work(f"{base}/gzip"))
        assert result.outcome == "ok", result.error
        assert result.fingerprint and not result.fingerprint.startswith("pinned")  # browser path
        assert result.payload_ref and result.size == len(BODY)
        assert await _stored(nc, namespace, result.payload_ref) == MEMBER  # not compressed again
        assert await f.store.get(result.payload_ref) == BODY


@pytest.mark.parametrize("name", ["br", "deflate", "identity", "two-members", "trailing"])
async def test_other_bodies_are_stored_as_gzip_made_here(nc, namespace, name) -> None:
    expected = BODY
    async with serve(_encoded) as base, fetcher(nc, namespace) as f:
        result = await f.fetch(work(f"{base}/{name}"))
        assert result.outcome == "ok", result.error
        assert result.payload_ref and result.size == len(expected)
        stored = await _stored(nc, namespace, result.payload_ref)
        assert stored != ENCODED[name][0]
        assert gzip.decompress(stored) == expected
        assert await f.store.get(result.payload_ref) == expected


async def test_the_same_body_has_the_same_address_whoever_compressed_it(nc, namespace) -> None:
    async with serve(_encoded) as base, fetcher(nc, namespace) as f:
        sent = await f.fetch(work(f"{base}/gzip"))
        ours = await f.fetch(work(f"{base}/identity", entry_id=2))
    assert sent.payload_ref == ours.payload_ref


@pytest.mark.parametrize("name", ["cut", "corrupt", "bad-crc"])
async def test_a_broken_gzip_body_is_a_network_error(nc, namespace, name) -> None:
    async with serve(_encoded) as base, fetcher(nc, namespace) as f:
        result = await f.fetch(work(f"{base}/{name}"))
    assert result.outcome == "network_error"
    assert result.error and "gzip" in result.error
    assert result.payload_ref is None


async def test_a_gzip_body_over_the_cap_is_rejected_before_it_is_inflated(nc, namespace) -> None:
    async with serve(_encoded) as base, fetcher(nc, namespace) as f:
        result = await f.fetch(work(f"{base}/gzip", max_bytes=len(BODY) - 1))
    assert result.outcome == "rejected"
    assert result.payload_ref is None
