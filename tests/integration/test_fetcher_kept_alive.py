"""The browser transport and a server that closes its kept-alive connections: a request that
crosses the close on a reused connection is sent again, as a browser does, and one whose own
new connection is closed unanswered is not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from yarl import URL

from services.fetcher.browser import BrowserSession, Trust
from services.fetcher.http import TransportError
from services.fetcher.identity import identity_for
from shared.guard import Allowlist, GuardedResolver

HOST = "127.0.0.2"


@asynccontextmanager
async def _server(answer: bytes) -> AsyncIterator[tuple[str, list[int]]]:
    """Answers a connection's first request with ``answer`` (HTTP/1.1 without "Connection:
    close", so the client keeps the connection) and closes the connection, unanswered, at its
    second: what the client sees when its request and the server's close of an idle kept
    connection cross. ``requests`` counts the requests that arrived."""
    requests: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            requests.append(1)
            if answer:
                writer.write(answer)
                await writer.drain()
                await reader.readuntil(b"\r\n\r\n")
                requests.append(2)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, HOST, 0)
    try:
        yield f"http://{HOST}:{server.sockets[0].getsockname()[1]}", requests
    finally:
        server.close()
        await server.wait_closed()


def _session() -> BrowserSession:
    allow = Allowlist.from_policy([f"{HOST}/32"])
    return BrowserSession(identity_for("kept-alive"), None, GuardedResolver(allow), Trust())


async def _get(session: BrowserSession, url: str) -> int:
    async with session.open("GET", URL(url), {}, None, None) as answer:
        async for _ in answer.chunks():
            pass
        return answer.status


async def test_a_request_on_a_connection_the_server_closed_is_sent_again() -> None:
    session = _session()
    async with _server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") as (base, requests):
        statuses = [await _get(session, f"{base}/{i}") for i in range(20)]
    await session.resolver.close()
    assert statuses == [200] * 20  # every second request met a closed connection, and went again
    assert requests.count(2) == 19  # on the kept connection each time, then on a new one


async def test_a_new_connection_closed_unanswered_is_not_retried() -> None:
    session = _session()
    async with _server(b"") as (base, requests):
        with pytest.raises(TransportError):
            await _get(session, f"{base}/")
    await session.resolver.close()
    assert len(requests) == 1  # the server's empty reply is its answer: asked once


async def test_a_post_on_a_connection_the_server_closed_is_not_sent_again() -> None:
    session = _session()
    async with _server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") as (base, requests):
        assert await _get(session, f"{base}/") == 200
        with pytest.raises(TransportError):
            async with session.open("POST", URL(f"{base}/form"), {}, b"q=1", None):
                raise AssertionError("the kept connection was closed unanswered")
    await session.resolver.close()
    assert requests == [1, 2]  # the POST arrived once; a second send could repeat its effect
