"""The dashboard's API views against real Postgres: key-set product pages (filters, sorts, a
cursor walk that sees every product once), a product's history with its stored pages, matches
by GTIN, the job history with pages per minute, a job's progress, and streamed exports."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas.read import AlertRuleIn
from services.notifier import store as notifier_store
from tests.integration.test_api import WRITE, Api, running_api

AUTH = {"Authorization": f"Bearer {WRITE}"}


@pytest.fixture
async def api(settings, pool, nc) -> AsyncIterator[Api]:
    async with running_api(settings, pool, nc) as a:
        yield a


N = 230  # products of source "a": several pages of 50


async def _seed(pool) -> dict[str, Any]:
    async with pool.acquire() as conn:
        for name in ("a", "b"):
            await conn.execute("INSERT INTO sources (name, definition) VALUES ($1, '{}')", name)
        job1 = await conn.fetchval(
            "INSERT INTO jobs (source, status, definition, created_at, finished_at, counters) "
            "VALUES ('a', 'completed', '{}', now() - interval '2 hours', "
            "now() - interval '110 minutes', "
            """'{"total": 10, "open": 0, "done": 8, "failed": 2, "products": 7}') RETURNING id"""
        )
        job2 = await conn.fetchval(
            "INSERT INTO jobs (source, status, definition, created_at, finished_at, counters) "
            "VALUES ('a', 'completed', '{}', now() - interval '1 hour', "
            "now() - interval '50 minutes', "
            """'{"total": 4, "open": 0, "done": 4, "failed": 0, "products": 4}') RETURNING id"""
        )
        await conn.executemany(
            "INSERT INTO products (source, key, name, price, currency, availability, gtin, url,"
            " updated_at) VALUES ($1, $2, $3, $4, 'EUR', $5, $6, $7, now() - make_interval("
            "secs => $8))",
            [
                (
                    "a",
                    f"k{i:03}",
                    f"Item {N - i:03}" if i % 7 else None,
                    None if i == 5 else 10 + i,
                    "in_stock" if i % 3 else "out_of_stock",
                    f"g{i}" if i < 3 else None,
                    f"http://127.0.0.2:9/p/{i}",
                    i,
                )
                for i in range(N)
            ]
            + [
                ("b", "x0", "Item B0", 9, "in_stock", "g0", "http://127.0.0.3:9/p/0", 1),
                ("b", "x1", "Item B1", 30, "in_stock", "g1", "http://127.0.0.3:9/p/1", 1),
            ],
        )
        # k001's history: two crawls, each with its stored page; the second a price drop.
        for job, price, minutes, ref in ((job1, 20, 110, "js:aa"), (job2, 11, 55, "js:bb")):
            await conn.execute(
                "INSERT INTO snapshots (source, key, job_id, price, currency, availability,"
                " observed_at) VALUES ('a', 'k001', $1, $2, 'EUR', 'in_stock',"
                " now() - make_interval(mins => $3))",
                job,
                price,
                minutes,
            )
            await conn.execute(
                "INSERT INTO payloads (ref, url, job_id, attempt_id, status, content_type, size,"
                " sha256, fetched_at) VALUES ($1, 'http://127.0.0.2:9/p/1', $2, $3, 200,"
                " 'text/html', 10, 'x', now() - make_interval(mins => $4))",
                ref,
                job,
                f"{job}.1",
                minutes + 1,
            )
        # job1's attempts: 6 in its first minute, 4 in its second, 2 of them failed.
        entry = await conn.fetchval(
            "INSERT INTO entries (job_id, url, domain, priority, rank, state) VALUES"
            " ($1, 'http://127.0.0.2:9/', '127.0.0.2:9', 0, 0, 'done') RETURNING id",
            job1,
        )
        await conn.executemany(
            "INSERT INTO attempts (attempt_id, entry_id, job_id, url, outcome, status, error,"
            " recorded_at) SELECT $1, $2, id, 'http://127.0.0.2:9/', $3, $4, $5,"
            " created_at + make_interval(secs => $6) FROM jobs WHERE id = $7",
            [
                (
                    f"t{i}",
                    entry,
                    "server_error" if i in (7, 8) else "ok",
                    503 if i in (7, 8) else 200,
                    "upstream down" if i in (7, 8) else None,
                    i * 10 + 1,
                    job1,
                )
                for i in range(10)
            ],
        )
    return {"job1": job1, "job2": job2}


async def test_products_walk_by_cursor_filters_and_sorts(api: Api, pool) -> None:
    await _seed(pool)
    seen: list[str] = []
    cursor, pages = None, 0
    while True:
        path = "/api/catalog/products?source=a&limit=50" + (f"&cursor={cursor}" if cursor else "")
        status, page, _ = await api.call("GET", path)
        assert status == 200, page
        if pages == 0:
            assert page["total"] == N
        else:
            assert page["total"] is None  # counted on the first page only
        seen += [p["key"] for p in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 5 and seen == sorted(f"k{i:03}" for i in range(N))

    for sort, check in (
        ("price", lambda ps: [float(p["price"]) for p in ps if p["price"]]),
        ("name", lambda ps: [p["name"] or "" for p in ps]),
    ):
        got: list[Any] = []
        cursor = None
        while True:
            path = f"/api/catalog/products?source=a&sort={sort}&limit=97"
            status, page, _ = await api.call("GET", path + (f"&cursor={cursor}" if cursor else ""))
            assert status == 200, page
            got += page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(got) == N and len({p["key"] for p in got}) == N, sort
        assert check(got) == sorted(check(got)), sort
        if sort == "price":
            assert got[-1]["key"] == "k005"  # no price: last
    status, page, _ = await api.call("GET", "/api/catalog/products?sort=updated&limit=3")
    assert [p["key"] for p in page["items"]] == ["k000", "x0", "x1"] or page["items"][0]["key"] in (
        "k000",
        "x0",
        "x1",
    )

    status, page, _ = await api.call("GET", "/api/catalog/products?total=false&limit=1")
    assert page["total"] is None and len(page["items"]) == 1
    status, page, _ = await api.call("GET", "/api/catalog/products?availability=out_of_stock")
    assert page["total"] == len(range(0, N, 3))
    status, page, _ = await api.call("GET", "/api/catalog/products?q=item%20b")
    assert [p["key"] for p in page["items"]] == ["x0", "x1"]
    status, page, _ = await api.call("GET", "/api/catalog/products?changed_within=24")
    assert [p["key"] for p in page["items"]] == ["k001"]
    # 400: the request breaks the document; 422: it follows it, but names no cursor we gave.
    for bad, expected in (
        ("sort=cheapest", 400),
        ("cursor=%%%", 400),
        ("changed_within=0", 400),
        ("cursor=WzFd", 422),
    ):
        status, body, _ = await api.call("GET", f"/api/catalog/products?{bad}")
        assert status == expected, (bad, body)


async def test_has_alerts_lists_the_products_rules_target(api: Api, pool) -> None:
    """The filter agrees with the notifier's own matching (rules_for): a product has alerts
    exactly when some rule would match a change event of it."""
    await _seed(pool)
    async with pool.acquire() as conn:
        await conn.executemany(
            "INSERT INTO products (source, key, variant_of, name, price, currency, gtin)"
            " VALUES ('a', $1, $2, $1, 10, 'EUR', $3)",
            [
                ("k010#s", "k010", None),
                ("k010#m", "k010", None),
                ("k020#m", "k020", None),
                ("k020#l", "k020", "g-var"),
            ],
        )
        for scope in (
            {"source": "b"},  # a whole source
            {"source": "a", "product_key": "k010"},  # a product and its variants
            {"source": "a", "variant_key": "k020#m"},  # one variant
            {"source": "a", "gtin": "g2"},
            {"source": "a", "gtin": "g-var"},  # a variant's own GTIN
            {"source": "a", "product_key": "k030", "gtin": "g-none"},  # both must hold
            {"source": "nowhere"},
        ):
            await notifier_store.add_rule(
                conn,
                AlertRuleIn(condition="change", webhook="http://127.0.0.9:9/hook", **scope),
            )
        expected = set()
        for row in await conn.fetch("SELECT source, key, variant_of, gtin FROM products"):
            variant_of = row["variant_of"]
            key, variant = (variant_of, row["key"]) if variant_of else (row["key"], "")
            if await notifier_store.rules_for(conn, row["source"], key, variant, row["gtin"]):
                expected.add((row["source"], row["key"]))
        total = await conn.fetchval("SELECT count(*) FROM products")
    assert expected == {
        ("b", "x0"),
        ("b", "x1"),
        ("a", "k010"),
        ("a", "k010#s"),
        ("a", "k010#m"),
        ("a", "k020#m"),
        ("a", "k020#l"),
        ("a", "k002"),
    }
    for sort in ("key", "price"):
        got: list[tuple[str, str]] = []
        cursor = None
        while True:
            path = f"/api/catalog/products?has_alerts=true&sort={sort}&limit=3"
            status, page, _ = await api.call("GET", path + (f"&cursor={cursor}" if cursor else ""))
            assert status == 200, page
            if cursor is None:
                assert page["total"] == len(expected)
            got += [(p["source"], p["key"]) for p in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(got) == sorted(expected) and len(got) == len(expected), sort
    status, page, _ = await api.call("GET", "/api/catalog/products?has_alerts=false&limit=1")
    assert page["total"] == total - len(expected)
    status, page, _ = await api.call("GET", "/api/catalog/products?has_alerts=true&source=b")
    assert [p["key"] for p in page["items"]] == ["x0", "x1"]


async def test_history_links_each_change_to_its_job_and_pages(api: Api, pool) -> None:
    jobs = await _seed(pool)
    status, body, _ = await api.call("GET", "/api/products/a/k001/history")
    assert status == 200, body
    assert body["product"]["name"] == f"Item {N - 1:03}"
    points = body["points"]
    assert [(p["job_id"], p["price"]) for p in points] == [
        (jobs["job1"], "20"),
        (jobs["job2"], "11"),
    ]
    assert [p["payload_ref"] for p in points] == ["js:aa", "js:bb"]
    assert [p["previous_ref"] for p in points] == [None, "js:aa"]
    status, body, _ = await api.call("GET", "/api/products/a/k001/history?limit=1")
    assert len(body["points"]) == 1 and body["next_cursor"]
    status, rest, _ = await api.call(
        "GET", f"/api/products/a/k001/history?limit=1&cursor={body['next_cursor']}"
    )
    assert [p["price"] for p in rest["points"]] == ["11"] and rest["next_cursor"] is None
    status, _, _ = await api.call("GET", "/api/products/a/nope/history")
    assert status == 404


async def test_history_carries_each_variants_series(api: Api, pool) -> None:
    jobs = await _seed(pool)
    async with pool.acquire() as conn:
        await conn.executemany(
            "INSERT INTO products (source, key, variant_of, name, price, currency, availability,"
            " url, attributes) VALUES ('a', $1, 'k001', $1, $2, 'EUR', $3,"
            " 'http://127.0.0.2:9/p/1', $4)",
            [("k001#s", 12, "in_stock", {"size": "S"}), ("k001#m", 14, "out_of_stock", {})],
        )
        # A variant of another product: not k001's.
        await conn.execute(
            "INSERT INTO products (source, key, variant_of, price)"
            " VALUES ('a', 'k002#s', 'k002', 1)"
        )
        for key, job, price, stock, minutes in (
            ("k001#s", jobs["job1"], 22, "in_stock", 110),
            ("k001#m", jobs["job2"], 14, "out_of_stock", 55),
            ("k002#s", jobs["job2"], 1, "in_stock", 55),
        ):
            await conn.execute(
                "INSERT INTO snapshots (source, key, job_id, price, currency, availability,"
                " observed_at) VALUES ('a', $1, $2, $3, 'EUR', $4,"
                " now() - make_interval(mins => $5))",
                key,
                job,
                price,
                stock,
                minutes,
            )
    status, body, _ = await api.call("GET", "/api/products/a/k001/history")
    assert status == 200, body
    assert [v["key"] for v in body["variants"]] == ["k001#m", "k001#s"]
    assert body["variants"][1]["attributes"] == {"size": "S"}
    series = sorted((p["variant_key"] or "", p["price"], p["job_id"]) for p in body["points"])
    assert series == sorted(
        [
            ("", "20", jobs["job1"]),
            ("", "11", jobs["job2"]),
            ("k001#s", "22", jobs["job1"]),
            ("k001#m", "14", jobs["job2"]),
        ]
    )
    # A variant's point links the page its job stored, like the product's own.
    refs = {(p["variant_key"], p["payload_ref"], p["previous_ref"]) for p in body["points"]}
    assert ("k001#m", "js:bb", "js:aa") in refs
    # Paged by one, the cursor still walks every series once.
    seen, cursor = [], None
    while True:
        path = "/api/products/a/k001/history?limit=1" + (f"&cursor={cursor}" if cursor else "")
        status, page, _ = await api.call("GET", path)
        seen += page["points"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 4 and seen == body["points"]


async def test_match_by_gtin_across_sources(api: Api, pool) -> None:
    await _seed(pool)
    status, body, _ = await api.call("GET", "/api/match?gtin=g1")
    assert [(p["source"], p["price"]) for p in body["products"]] == [("a", "11"), ("b", "30")]
    status, body, _ = await api.call("GET", "/api/match/groups")
    assert [(g["gtin"], g["sources"]) for g in body["items"]] == [("g0", 2), ("g1", 2)]
    status, _, _ = await api.call("GET", "/api/match")
    assert status == 422


async def test_job_history_and_progress(api: Api, pool) -> None:
    jobs = await _seed(pool)
    status, body, _ = await api.call("GET", "/api/jobs/history?limit=1")
    assert status == 200, body
    assert [j["id"] for j in body["items"]] == [jobs["job2"]]
    status, body, _ = await api.call("GET", f"/api/jobs/history?cursor={body['next_cursor']}")
    (job1,) = body["items"]
    assert body["next_cursor"] is None
    assert job1["pages"] == 10 and job1["failed"] == 2 and job1["failure_rate"] == 0.2
    assert job1["duration_s"] == pytest.approx(600, abs=1)
    assert job1["pages_per_minute"] == [6, 4]
    status, body, _ = await api.call("GET", f"/api/jobs/{jobs['job1']}/progress")
    assert status == 200, body
    assert sum(sum(b["outcomes"].values()) for b in body["series"]) == 10
    assert [(e["outcome"], e["count"]) for e in body["top_errors"]] == [("server_error", 2)]
    status, _, _ = await api.call("GET", "/api/jobs/999999/progress")
    assert status == 404


async def test_exports_stream_every_format(api: Api, pool) -> None:
    await _seed(pool)
    status, text, resp = await api.call("GET", "/api/export/a/csv")
    assert status == 200 and resp.content_type == "text/csv"
    assert "attachment" in resp.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == N and rows[1]["key"] == "k001" and rows[1]["price"] == "11"
    async with api.http.get(api.base + "/api/export/a/jsonl?history=true", headers=AUTH) as r:
        assert r.status == 200 and r.content_type == "application/jsonl"
        text = await r.text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert [(r["key"], r["price"]) for r in lines] == [("k001", "20"), ("k001", "11")]
    status, text, _ = await api.call("GET", "/api/export/b/csv?since=2000-01-01T00:00:00Z")
    assert len(list(csv.DictReader(io.StringIO(text)))) == 2
    status, text, _ = await api.call("GET", "/api/export/b/csv?since=2999-01-01T00:00:00Z")
    assert text.splitlines()[0].startswith("key,sku,") and len(text.splitlines()) == 1
    pq = pytest.importorskip("pyarrow.parquet")
    async with api.http.get(api.base + "/api/export/a/parquet", headers=AUTH) as resp:
        assert resp.status == 200
        data = await resp.read()
    table = pq.read_table(io.BytesIO(data))
    assert table.num_rows == N and table.column("key")[1].as_py() == "k001"
    for bad in ("/api/export/nope/csv", "/api/export/a/csv?since=yesterday"):
        status, _, _ = await api.call("GET", bad)
        assert status in (400, 404), bad
