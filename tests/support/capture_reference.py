"""Capture a real browser's fingerprints with the test capture server.

    python -m tests.support.capture_reference [chromium]

Prints the JA4 and Akamai fingerprint of the connection that carried the page request, and
the header order of a page and of its image over HTTP/1.1 (a plain server: browsers send Host
and Connection there, and Chromium no Priority), as JSON; ``tests/support/fingerprints/*.json``
hold the values checked in. Talks to loopback only.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tests.support.capture import CaptureServer, make_ca


def capture(browser: str = "chromium") -> dict[str, str | None]:
    with tempfile.TemporaryDirectory() as tmp:
        _, cert, key = make_ca(Path(tmp))
        with CaptureServer(cert, key) as server:
            url = f"https://localhost:{server.port}/"
            _open(browser, url, f"{tmp}/profile")
            page = next(c for c in server.connections if c.requests)
            version = subprocess.run(
                [browser, "--version"], capture_output=True, text=True, check=True
            ).stdout.strip()
            return {
                "browser": version,
                "ja4": page.ja4,
                "akamai": page.akamai,
                **capture_http1(browser, tmp),
            }


def _open(browser: str, url: str, profile: str) -> None:
    """Load ``url`` in the headless browser (a fresh profile; certificate errors ignored: that
    changes the checking of certificates, not the ClientHello)."""
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--ignore-certificate-errors",
            f"--user-data-dir={profile}",
            "--no-first-run",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )


def capture_http1(browser: str, tmp: str) -> dict[str, list[str]]:
    """The header names, in order, of a page request and of its image over HTTP/1.1."""
    heads: dict[str, list[str]] = {}
    listener = socket.create_server(("127.0.0.2", 0))
    page = b"<html><body><img src=/pixel.png></body></html>"

    def serve() -> None:
        while len(heads) < 2:
            conn, _ = listener.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
                path = lines[0].split()[1]
                heads[path] = [line.split(":", 1)[0] for line in lines[1:]]
                body = page if path == "/" else b""
                kind = b"text/html" if path == "/" else b"image/png"
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: "
                    + kind
                    + b"\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\nConnection: close\r\n\r\n"
                    + body
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.2:{listener.getsockname()[1]}/"
    _open(browser, url, f"{tmp}/h1")
    thread.join(10)
    listener.close()
    return {
        "http1_header_order": heads.get("/", []),
        "http1_image_header_order": heads.get("/pixel.png", []),
    }


if __name__ == "__main__":
    print(json.dumps(capture(*sys.argv[1:]), indent=2))
