"""``trawl export`` as a user runs it (a real process): CSV to stdout, history as JSON Lines,
Parquet to a file, and a clear message instead of a traceback when pyarrow is missing or the
source is unknown."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import sys
from pathlib import Path

import pytest

TRAWL = str(Path(sys.executable).with_name("trawl"))
# The CLI with pyarrow made unimportable, as on an install without the parquet extra.
NO_PYARROW = "import sys; sys.modules['pyarrow'] = None; from control.cli import main; main()"


async def run(env: dict[str, str], *args: str, python: str | None = None) -> tuple[int, bytes, str]:
    cmd = [sys.executable, "-c", python, *args] if python else [TRAWL, *args]
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out, err.decode()


async def _seed(pool) -> None:
    async with pool.acquire() as conn:
        await conn.execute("INSERT INTO sources (name, definition) VALUES ('shop', '{}')")
        await conn.executemany(
            "INSERT INTO products (source, key, name, price, currency, availability, prices)"
            " VALUES ('shop', $1, $2, $3, 'EUR', 'in_stock', $4)",
            [(f"k{i}", f'Item, "{i}"', f"{i}.10", {"member": f"{i}"}) for i in range(5)],
        )
        await conn.executemany(
            "INSERT INTO snapshots (source, key, price, currency, availability, observed_at)"
            " VALUES ('shop', 'k1', $1::numeric, 'EUR', 'in_stock', $2::text::timestamptz)",
            [("9.99", "2026-01-01T00:00:00Z"), ("8.50", "2026-02-01T00:00:00Z")],
        )


async def test_export_formats_and_errors(env, pool, tmp_path: Path) -> None:
    await _seed(pool)
    code, out, err = await run(env, "export", "shop")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out.decode())))
    assert [r["key"] for r in rows] == [f"k{i}" for i in range(5)]
    assert rows[2]["name"] == 'Item, "2"' and rows[2]["price"] == "2.10"
    assert json.loads(rows[2]["prices"]) == {"member": "2"}

    code, out, err = await run(
        env, "export", "shop", "--format", "jsonl", "--history", "--since", "2026-01-15"
    )
    assert code == 0, err
    lines = [json.loads(line) for line in out.decode().splitlines()]
    assert [(r["key"], r["price"]) for r in lines] == [("k1", "8.50")]

    pq = pytest.importorskip("pyarrow.parquet")
    target = tmp_path / "shop.parquet"
    code, out, err = await run(env, "export", "shop", "--format", "parquet", "-o", str(target))
    assert code == 0, err
    table = pq.read_table(target)
    assert table.num_rows == 5 and table.column("price").to_pylist()[2] == "2.10"

    code, out, err = await run(env, "export", "shop", "--format", "parquet", python=NO_PYARROW)
    assert code == 2 and out == b""
    assert "pip install 'trawl[parquet]'" in err and "Traceback" not in err

    code, out, err = await run(env, "export", "nope")
    assert code == 2 and "no source 'nope'" in err
    code, out, err = await run(env, "export", "shop", "--since", "last tuesday")
    assert code == 2 and "ISO 8601" in err
