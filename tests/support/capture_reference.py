"""Capture a real browser's fingerprints with the test capture server.

    python -m tests.support.capture_reference [chromium]

Prints the JA4 and Akamai fingerprint of the connection that carried the page request, as
JSON; ``tests/support/fingerprints/*.json`` hold the values checked in. Talks to loopback only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.capture import CaptureServer, make_ca


def capture(browser: str = "chromium") -> dict[str, str | None]:
    with tempfile.TemporaryDirectory() as tmp:
        _, cert, key = make_ca(Path(tmp))
        with CaptureServer(cert, key) as server:
            url = f"https://localhost:{server.port}/"
            subprocess.run(
                [
                    browser,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--ignore-certificate-errors",
                    f"--user-data-dir={tmp}/profile",
                    "--no-first-run",
                    "--dump-dom",
                    url,
                ],
                capture_output=True,
                timeout=120,
                check=True,
            )
            page = next(c for c in server.connections if c.requests)
            version = subprocess.run(
                [browser, "--version"], capture_output=True, text=True, check=True
            ).stdout.strip()
            return {"browser": version, "ja4": page.ja4, "akamai": page.akamai}


if __name__ == "__main__":
    print(json.dumps(capture(*sys.argv[1:]), indent=2))
