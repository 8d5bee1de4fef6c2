"""Generate the JSON Schema files of the wire messages: ``python -m schemas.generate``.

A test fails when the committed files differ from what this produces.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec

from schemas.messages import ALL_MESSAGES

OUT = Path(__file__).resolve().parent


def render() -> dict[str, str]:
    """File name → content, for every message type."""
    files = {}
    for message in ALL_MESSAGES:
        schema = msgspec.json.schema(message)
        name = message.__struct_config__.tag
        files[f"{name}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return files


def main() -> None:
    check = "--check" in sys.argv
    stale = []
    for name, content in render().items():
        path = OUT / name
        if check:
            if not path.exists() or path.read_text() != content:
                stale.append(name)
        else:
            path.write_text(content)
    if stale:
        print(f"schemas out of date: {', '.join(stale)} (run `make schemas`)")
        sys.exit(1)


if __name__ == "__main__":
    main()
