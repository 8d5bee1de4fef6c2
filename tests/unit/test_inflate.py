"""``shared.payloads.inflate`` reads every gzip as ``gzip.decompress`` does: the one-member
fast path, and what it hands back to ``gzip.decompress`` (several members, padding, damage)."""

from __future__ import annotations

import gzip
import io
import os

import pytest

from shared.payloads import compress, inflate

PAGE = b"<html><body>" + b"<p>caf\xc3\xa9 50 \xe2\x82\xac</p>" * 3000 + b"</body></html>"


def _server_gzip(body: bytes) -> bytes:
    """A gzip as a server may send it: level 1, with a file name and a time in the header."""
    out = io.BytesIO()
    with gzip.GzipFile(filename="page.html", mode="wb", fileobj=out, compresslevel=1, mtime=7) as f:
        f.write(body)
    return out.getvalue()


@pytest.mark.parametrize(
    "packed",
    [
        compress(PAGE),
        _server_gzip(PAGE),
        compress(b""),
        compress(os.urandom(70_000)),  # stored blocks: output as large as the input
        compress(PAGE) + compress(b"<p>second member</p>"),
        compress(PAGE) + compress(PAGE),  # a length check alone would read only the first
        compress(PAGE) + b"\x00" * 8,  # padding gzip.decompress skips
    ],
    ids=["ours", "server", "empty", "incompressible", "two-members", "same-size", "padded"],
)
def test_inflate_reads_what_gzip_decompress_reads(packed):
    assert inflate(packed) == gzip.decompress(packed)


def test_a_member_whose_trailer_lies_is_read_by_gzip_decompress_and_fails_as_it_does():
    packed = bytearray(compress(PAGE))
    packed[-4:] = (len(PAGE) + 1).to_bytes(4, "little")  # ISIZE off by one
    with pytest.raises(gzip.BadGzipFile):
        inflate(bytes(packed))
    damaged = compress(PAGE)[:-20]
    with pytest.raises(EOFError):
        inflate(damaged)
    with pytest.raises(gzip.BadGzipFile):
        inflate(b"not a gzip at all")


def test_a_huge_claimed_size_is_refused():
    packed = bytearray(compress(PAGE))
    packed[-4:] = (0xFFFFFFFF).to_bytes(4, "little")  # 4 GiB claimed: zlib's length check
    with pytest.raises(gzip.BadGzipFile):
        inflate(bytes(packed))
