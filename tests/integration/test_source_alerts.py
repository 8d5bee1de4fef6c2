"""Alert rules written in a source file, applied with ``trawl source apply`` as a user runs it
(a real process): the file's rules are added, kept, updated in place (named) or replaced
(unnamed), and removed as a set; rules made by the CLI are never touched; a bad rule is refused
with its line and field and changes nothing; secret values never appear."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from schemas.read import AlertRuleIn
from services.notifier import store

TRAWL = str(Path(sys.executable).with_name("trawl"))
KEY = "s3cr3t-hmac-key-value"
HOOK_TOKEN = "t0ken-in-the-url"

BASE = """\
name: shop
seeds: [https://shop.example/c]
"""


async def apply(env: dict[str, str], path: Path, text: str) -> tuple[int, str, str]:
    await asyncio.to_thread(path.write_text, text)
    proc = await asyncio.create_subprocess_exec(
        TRAWL,
        "source",
        "apply",
        str(path),
        "--json",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def alerts(*rules: str) -> str:
    return BASE + "alerts:\n" + "".join(rules)


NAMED = """\
  - name: kettle
    condition: below
    threshold: 20
    product: kettle-1
    webhook: https://hooks.example.com/t/${TRAWL_SECRET_HOOK_TOKEN}
    secret: ${TRAWL_SECRET_HOOK_KEY}
"""
UNNAMED = """\
  - condition: drop
    threshold: 10%
    debounce: 30m
    apprise: ntfy://ntfy.example.com/prices
"""


async def test_apply_reconciles_the_files_rules_and_leaves_the_clis_alone(
    env, pool, tmp_path: Path
) -> None:
    env = dict(env, TRAWL_SECRET_HOOK_KEY=KEY, TRAWL_SECRET_HOOK_TOKEN=HOOK_TOKEN)
    file = tmp_path / "shop.yaml"
    async with pool.acquire() as conn:
        cli = await store.add_rule(
            conn,
            AlertRuleIn(source="shop", condition="delisted", webhook="https://h.example/x"),
        )

    async def rules() -> dict[int, dict]:
        async with pool.acquire() as conn:
            out = await store.list_rules(conn, "shop")
        return {r.id: {"origin": r.origin, "rule": r} for r in out}

    code, out, err = await apply(env, file, alerts(NAMED, UNNAMED))
    assert code == 0, err
    assert json.loads(out)["alerts"] == {"added": 2, "updated": 0, "removed": 0, "kept": 0}
    first = await rules()
    assert [v["origin"] for v in first.values()] == [None, "source", "source"]
    named = next(i for i, v in first.items() if v["rule"].condition == "below")
    unnamed = next(i for i, v in first.items() if v["rule"].condition == "drop")
    # Only the references are stored; the threshold and durations read as the CLI reads them.
    assert first[named]["rule"].secret == "${TRAWL_SECRET_HOOK_KEY}"
    assert first[named]["rule"].webhook.endswith("/${TRAWL_SECRET_HOOK_TOKEN}")
    assert first[named]["rule"].product_key == "kettle-1"
    assert first[unnamed]["rule"].threshold == "10.0"  # as `--drop 10%` stores it
    assert first[unnamed]["rule"].debounce_seconds == 1800
    assert len(first[unnamed]["rule"].secret) == 64  # generated: it has no webhook to sign

    # The same file again: nothing changes.
    code, out, err = await apply(env, file, alerts(NAMED, UNNAMED))
    assert code == 0, err
    assert json.loads(out)["alerts"] == {"added": 0, "updated": 0, "removed": 0, "kept": 2}
    assert await rules() == first

    # Changed: the named rule is updated in place, the unnamed one is a new rule.
    code, out, err = await apply(
        env, file, alerts(NAMED.replace("20", "15"), UNNAMED.replace("30m", "2h"))
    )
    assert code == 0, err
    assert json.loads(out)["alerts"] == {"added": 1, "updated": 1, "removed": 1, "kept": 0}
    second = await rules()
    assert second[named]["rule"].threshold == "15"
    assert second[named]["rule"].secret == "${TRAWL_SECRET_HOOK_KEY}"
    assert unnamed not in second
    [replaced] = [i for i, v in second.items() if v["rule"].condition == "drop"]
    assert second[replaced]["rule"].debounce_seconds == 7200

    # A bad rule: the line and the field, and the stored rules stay as they were.
    bad = alerts(NAMED, "  - condition: drop\n    webhook: https://h.example/y\n")
    code, out, err = await apply(env, file, bad)
    assert code != 0
    assert "shop.yaml:10: alerts[1].threshold: a drop rule needs a threshold" in err, err
    code, out, err = await apply(env, file, alerts(NAMED.replace("${TRAWL_SECRET_HOOK_KEY}", KEY)))
    assert code != 0 and "alerts[0].secret: write the secret as a ${TRAWL_SECRET_NAME}" in err
    assert KEY not in out + err  # refused without being repeated
    assert await rules() == second

    # Listed with the others, marked, and never with a secret's value.
    proc = await asyncio.create_subprocess_exec(
        TRAWL, "alerts", "list", "shop", env=env, stdout=asyncio.subprocess.PIPE
    )
    listed, _ = await proc.communicate()
    assert listed.decode().count("(in the source file)") == 2
    assert KEY not in listed.decode() and HOOK_TOKEN not in listed.decode()

    # A file rule is the file's: the CLI may not remove it.
    proc = await asyncio.create_subprocess_exec(
        TRAWL, "alerts", "rm", str(named), env=env, stderr=asyncio.subprocess.PIPE
    )
    _, rm_err = await proc.communicate()
    assert proc.returncode != 0 and "remove it there" in rm_err.decode()

    # No alerts in the file: its rules go, the CLI's stays.
    code, out, err = await apply(env, file, BASE)
    assert code == 0, err
    assert json.loads(out)["alerts"] == {"added": 0, "updated": 0, "removed": 2, "kept": 0}
    assert list(await rules()) == [cli.id]
    assert KEY not in out + err and HOOK_TOKEN not in out + err
