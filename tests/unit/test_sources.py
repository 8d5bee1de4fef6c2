"""Source definitions: loading, validation messages (file, line, field) and schedules."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from schemas.source import Source
from shared.errors import SourceError
from shared.schedule_spec import parse_schedule
from shared.sources import (
    effective_allowed_domains,
    load_source_file,
    load_source_text,
    source_from_dict,
    source_to_dict,
)

# The example of DESIGN.md "Source definition", verbatim (comments and inline URL lists included).
DESIGN_EXAMPLE = r"""
name: demo-shop
seeds: [http://127.0.0.2:8801/c/kitchen?page=1, http://127.0.0.3:8801/c/garden]
search: {url: "http://127.0.0.2:8801/search?q={keyword}", keywords: [kettle, lamp]}
sitemaps: [http://127.0.0.2:8801/sitemap.xml]  # or `robots` to take them from robots.txt
allowed_domains: [127.0.0.2:8801, 127.0.0.3:8801]   # host[:port]; default: the seeds' hosts
allow_private: [127.0.0.2/32, 127.0.0.3/32]  # networks exempt from the SSRF guard; true = all
robots: obey                                 # obey | ignore
links:                                       # omitted → default heuristics
  product: {css: "a.product-card", pattern: "/p/[^/]+$"}
  pagination: {css: "a[rel=next], nav.pagination a", pattern: "[?&]page=\\d+"}
  deny: ["/cart", "/account"]                # URL regexes never admitted
  max_depth: 10
fields: {price: {css: ".price"}}             # per-field CSS overrides (optional)
pacing: {profile: stealth}                   # or {min_delay: 5, max_delay: 15, max_in_flight: 1}
retry: {max_retries: 3, base_delay: 60, factor: 2, jitter: 0.2, cap: 86400}
proxies: none                                # none | optional | required
locale: en-US
refresh: {schedule: "@every 4h", miss_threshold: 3, max_failure_rate: 0.2}
""".lstrip()

MINIMAL = "name: shop\nseeds: [https://shop.example.com/]\n"


def load(text: str, fmt: str = "yaml") -> Source:
    return load_source_text(text, filename="demo.yaml", fmt=fmt)


def error_of(text: str, fmt: str = "yaml") -> str:
    with pytest.raises(SourceError) as info:
        load(text, fmt)
    return str(info.value)


# -- valid definitions -------------------------------------------------------------------------


def test_design_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(DESIGN_EXAMPLE)
    source = load_source_file(path)
    assert source.name == "demo-shop"
    assert source.seeds == [
        "http://127.0.0.2:8801/c/kitchen?page=1",
        "http://127.0.0.3:8801/c/garden",
    ]
    assert source.search is not None and source.search.keywords == ["kettle", "lamp"]
    assert source.sitemaps == ["http://127.0.0.2:8801/sitemap.xml"]
    assert source.allow_private == ["127.0.0.2/32", "127.0.0.3/32"]
    assert source.links.pagination is not None
    assert source.links.pagination.pattern == r"[?&]page=\d+"
    assert source.links.deny == ["/cart", "/account"]
    assert source.fields["price"].css == ".price"
    assert source.pacing.resolved() == (5.0, 15.0, 1)
    assert source.retry.cap == 86400.0
    assert source.refresh.schedule == "@every 4h"


def test_minimal_source_gets_defaults() -> None:
    source = load(MINIMAL)
    assert source.name == "shop"
    assert source.robots == "obey"
    assert source.pacing.profile == "stealth"
    assert source.retry.max_retries == 3
    assert source.refresh.miss_threshold == 3
    assert source.links.product is None


def test_search_or_sitemaps_make_seeds_optional_in_content() -> None:
    text = "name: s\nseeds: []\nsitemaps: [http://shop.test/sitemap.xml]\n"
    assert load(text).seeds == []
    assert load("name: s\nseeds: []\nsitemaps: robots\nallowed_domains: [shop.test]\n")


def test_json_source(tmp_path: Path) -> None:
    path = tmp_path / "shop.json"
    path.write_text(
        json.dumps({"name": "shop", "seeds": ["http://shop.test/"], "robots": "ignore"})
    )
    assert load_source_file(path).robots == "ignore"


def test_unknown_suffix_is_read_as_yaml(tmp_path: Path) -> None:
    path = tmp_path / "shop.src"
    path.write_text(MINIMAL)
    assert load_source_file(path).name == "shop"


def test_round_trip_through_dict_and_json() -> None:
    source = load(DESIGN_EXAMPLE)
    data = source_to_dict(source)
    assert source_from_dict(data) == source
    assert source_from_dict(json.loads(json.dumps(data))) == source
    assert load(json.dumps(data, indent=2), fmt="json") == source


def test_allow_private_true() -> None:
    assert load(MINIMAL + "allow_private: true\n").allow_private is True


# -- errors: file, line and field --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: a\nseeds: [http://a.test]\npacing:\n  min_delay: fast\n",
            'demo.yaml:4: pacing.min_delay: expected a number, got "fast"',
        ),
        (
            "name: a\nseeds:\n  - http://a.test\n  - ftp://x\n",
            'demo.yaml:4: seeds[1]: "ftp://x" is not an http(s) URL',
        ),
        ("name: a\nseeds: [http://a.test]\n\npacng: {}\n", 'demo.yaml:4: unknown field "pacng"'),
        (
            "name: a\nseeds: [http://a.test]\nlinks:\n  product:\n    patern: x\n",
            'demo.yaml:5: links.product: unknown field "patern" (did you mean "pattern"?)',
        ),
        (
            "name: a\nseeds: [http://a.test]\nfields:\n  price: {css: .p}\n  sku: {css: 3}\n",
            "demo.yaml:5: fields.sku.css: expected a string, got 3",
        ),
        (
            "name: a\nseeds: [http://a.test]\nrobots: maybe\n",
            'demo.yaml:3: robots: expected one of "obey", "ignore", got "maybe"',
        ),
        (
            "name: a\nseeds: [http://a.test]\npacing: {max_in_flight: 1.5}\n",
            "demo.yaml:3: pacing.max_in_flight: expected an integer, got 1.5",
        ),
        (
            "name: a\n",
            "demo.yaml:1: seeds: give at least one seed (or a search, sitemaps or an api)",
        ),
        ("name: a\nseeds: [http://a.test]\nname: b\n", 'demo.yaml:3: duplicate field "name"'),
        ("name: Demo Shop\nseeds: [http://a.test]\n", 'demo.yaml:1: name: "Demo Shop" is not'),
        ("name: a\nseeds: []\n", "demo.yaml:2: seeds: give at least one seed"),
        ("name: a\nseeds: [/relative]\n", 'demo.yaml:2: seeds[0]: "/relative" is not an http'),
        (
            "name: a\nseeds: [http://a.test]\nsearch:\n  url: http://a.test/search?q=x\n",
            "demo.yaml:4: search.url: must contain the {keyword} placeholder",
        ),
        (
            "name: a\nseeds: [http://a.test]\nsitemaps: [sitemap.xml]\n",
            'demo.yaml:3: sitemaps[0]: "sitemap.xml" is not an http(s) URL',
        ),
        (
            "name: a\nseeds: [http://a.test]\nallowed_domains:\n  - a.test\n  - http://b.test\n",
            'demo.yaml:5: allowed_domains[1]: "http://b.test" is not host[:port]',
        ),
        (
            "name: a\nseeds: [http://a.test]\nallowed_domains: [a.test/shop]\n",
            "demo.yaml:3: allowed_domains[0]:",
        ),
        (
            "name: a\nseeds: [http://a.test]\nallow_private: [10.0.0.0/8, 10.0.0/33]\n",
            'demo.yaml:3: allow_private[1]: "10.0.0/33" is not an IP or CIDR network',
        ),
        (
            "name: a\nseeds: [http://a.test]\nlinks:\n  deny: ['/ok', '(']\n",
            'demo.yaml:4: links.deny[1]: "(" is not a valid regex',
        ),
        (
            "name: a\nseeds: [http://a.test]\nlinks:\n  product:\n    pattern: '[a-'\n",
            "demo.yaml:5: links.product.pattern:",
        ),
        (
            "name: a\nseeds: [http://a.test]\nlinks:\n  product: {css: '  '}\n",
            "demo.yaml:4: links.product.css: the CSS selector is empty",
        ),
        (
            "name: a\nseeds: [http://a.test]\nlinks:\n  pagination: {}\n",
            "demo.yaml:4: links.pagination: give css, pattern or both",
        ),
        (
            "name: a\nseeds: [http://a.test]\nlinks:\n  max_pagination: 0\n",
            "demo.yaml:4: links.max_pagination: 0 must be in 1..100_000",
        ),
        (
            "name: a\nseeds: [http://a.test]\nfields:\n  price: {css: ''}\n",
            "demo.yaml:4: fields.price.css: the CSS selector is empty",
        ),
        (
            "name: a\nseeds: [http://a.test]\npacing:\n  min_delay: 5\n  max_delay: 1\n",
            "demo.yaml:5: pacing.max_delay: 1.0 is below min_delay",
        ),
        (
            "name: a\nseeds: [http://a.test]\npacing: {min_delay: -1}\n",
            "demo.yaml:3: pacing.min_delay: -1.0 must be in 0..86_400",
        ),
        (
            "name: a\nseeds: [http://a.test]\npacing: {max_in_flight: 0}\n",
            "demo.yaml:3: pacing.max_in_flight: 0 must be in 1..256",
        ),
        (
            "name: a\nseeds: [http://a.test]\npacing: {max_retry_after: 999999999}\n",
            "demo.yaml:3: pacing.max_retry_after: 999999999.0 must be in 0..604_800",
        ),
        (
            "name: a\nseeds: [http://a.test]\nretry:\n  max_retries: 50\n",
            "demo.yaml:4: retry.max_retries: 50 must be in 0..20",
        ),
        (
            "name: a\nseeds: [http://a.test]\nretry: {jitter: 1.5}\n",
            "demo.yaml:3: retry.jitter: 1.5 must be in 0..1",
        ),
        (
            "name: a\nseeds: [http://a.test]\nretry: {factor: 0.5}\n",
            "demo.yaml:3: retry.factor: 0.5 must be in 1..10",
        ),
        (
            "name: a\nseeds: [http://a.test]\nretry: {base_delay: 0}\n",
            "demo.yaml:3: retry.base_delay: 0.0 must be > 0 and ≤ 86_400",
        ),
        (
            "name: a\nseeds: [http://a.test]\nretry: {cap: .nan}\n",
            "demo.yaml:3: retry.cap: nan must be > 0 and ≤ 2_592_000",
        ),
        (
            "name: a\nseeds: [http://a.test]\nrefresh:\n  schedule: '@every 4x'\n",
            "demo.yaml:4: refresh.schedule: '@every 4x'",
        ),
        (
            "name: a\nseeds: [http://a.test]\nrefresh: {schedule: '61 * * * *'}\n",
            "demo.yaml:3: refresh.schedule: '61 * * * *': not a valid cron expression",
        ),
        (
            "name: a\nseeds: [http://a.test]\nrefresh: {miss_threshold: 0}\n",
            "demo.yaml:3: refresh.miss_threshold: 0 must be in 1..1_000",
        ),
        (
            "name: a\nseeds: [http://a.test]\nrefresh: {max_failure_rate: 2}\n",
            "demo.yaml:3: refresh.max_failure_rate: 2.0 must be in 0..1",
        ),
    ],
)
def test_error_names_line_and_field(text: str, expected: str) -> None:
    assert expected in error_of(text)


def test_every_semantic_problem_is_reported() -> None:
    message = error_of("name: a\nseeds: [ftp://x]\nretry: {jitter: 2}\nlocale: 'en US'\n")
    lines = message.splitlines()
    assert lines[0].startswith("demo.yaml:2: seeds[0]:")
    assert lines[1].startswith("demo.yaml:3: retry.jitter:")
    assert lines[2].startswith("demo.yaml:4: locale:")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "demo.yaml: empty source definition"),
        ("# only a comment\n", "demo.yaml: empty source definition"),
        ("- name: a\n", "demo.yaml:1: expected a mapping of fields at the top level, got a list"),
        ("just text\n", 'expected a mapping of fields at the top level, got "just text"'),
        ("name: a\nseeds: [http://a.test\n", "demo.yaml:3: invalid YAML:"),
        ("name: a\n  seeds: x\n", "demo.yaml:2: invalid YAML: mapping values are not allowed"),
        ("name: a\n---\nname: b\n", "demo.yaml:2: invalid YAML:"),
        ("1: a\n", "demo.yaml:1: field names must be strings"),
    ],
)
def test_document_level_errors(text: str, expected: str) -> None:
    assert expected in error_of(text)


def test_json_errors_carry_lines() -> None:
    text = '{\n  "name": "a",\n  "seeds": [\n    "http://a.test",\n    "ftp://b"\n  ]\n}'
    assert 'demo.yaml:5: seeds[1]: "ftp://b" is not an http(s) URL' in error_of(text, "json")
    text = '{"name": "a", "seeds": ["http://a.test"],\n "pacing": {\n  "min_delay": "x"}}'
    assert 'demo.yaml:3: pacing.min_delay: expected a number, got "x"' in error_of(text, "json")
    text = '{"name": "a", "seeds": ["http://a.test"],\n\n "pacng": {"a": [1, {"b": null}]}}'
    assert 'demo.yaml:3: unknown field "pacng"' in error_of(text, "json")
    assert "demo.yaml:2: invalid JSON:" in error_of('{"name": "a",\n "seeds": [}', "json")
    assert "demo.yaml: empty source definition" in error_of("  \n", "json")


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="cannot read"):
        load_source_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yml"
    bad.write_text("name: a\nseeds: [http://a.test]\nrobots: no\n")
    with pytest.raises(SourceError, match=r"bad\.yml:3: robots: expected one of"):
        load_source_file(bad)


def test_dict_errors_name_the_field_without_a_line() -> None:
    with pytest.raises(SourceError) as info:
        source_from_dict({"name": "a", "seeds": ["http://a.test"], "pacing": {"min_delay": "x"}})
    assert str(info.value) == 'pacing.min_delay: expected a number, got "x"'


def test_yaml_aliases_and_merge_keys() -> None:
    text = (
        "name: a\nseeds: [http://a.test]\n"
        "x-rule: &rule {css: a.p}\n"  # an unknown field, but the alias must still work
    )
    assert 'demo.yaml:3: unknown field "x-rule"' in error_of(text)
    text = "name: a\nseeds: &s [http://a.test]\nsitemaps: *s\nlinks:\n  product: {<<: {css: a}}\n"
    assert load(text).sitemaps == ["http://a.test"]


# -- allowed domains ---------------------------------------------------------------------------


def test_effective_allowed_domains_explicit() -> None:
    assert effective_allowed_domains(load(DESIGN_EXAMPLE)) == ["127.0.0.2:8801", "127.0.0.3:8801"]


def test_effective_allowed_domains_from_urls() -> None:
    text = (
        "name: a\n"
        "seeds: [http://Shop.Test:80/a, https://shop.test/b, http://127.0.0.2:8801/c]\n"
        "search: {url: 'https://search.test:8443/?q={keyword}'}\n"
        "sitemaps: ['http://127.0.0.3:8801/sitemap.xml']\n"
    )
    assert effective_allowed_domains(load(text)) == [
        "shop.test",
        "www.shop.test",  # one site on both spellings; an address has no twin
        "127.0.0.2:8801",
        "search.test:8443",
        "www.search.test:8443",
        "127.0.0.3:8801",
    ]


def test_a_www_host_allows_its_bare_twin() -> None:
    text = "name: a\nseeds: [https://www.shop.test/a, http://localhost:8000/, https://www.co/]\n"
    assert effective_allowed_domains(load(text)) == [
        "www.shop.test",
        "shop.test",
        "localhost:8000",  # a bare name has no twin; neither has a www. host without a domain
        "www.co",
    ]


# -- schedule specs ----------------------------------------------------------------------------

T0 = datetime(2024, 3, 5, 13, 7, 30, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("@hourly", datetime(2024, 3, 5, 14, 0, tzinfo=UTC)),
        ("@daily", datetime(2024, 3, 6, tzinfo=UTC)),
        ("@weekly", datetime(2024, 3, 10, tzinfo=UTC)),
        ("@monthly", datetime(2024, 4, 1, tzinfo=UTC)),
        ("@yearly", datetime(2025, 1, 1, tzinfo=UTC)),
        ("*/15 * * * *", datetime(2024, 3, 5, 13, 15, tzinfo=UTC)),
        ("0 9 * * 1-5", datetime(2024, 3, 6, 9, 0, tzinfo=UTC)),
        ("@every 30m", datetime(2024, 3, 5, 13, 30, tzinfo=UTC)),
        ("@every 4h", datetime(2024, 3, 5, 16, 0, tzinfo=UTC)),
        ("@every 45s", datetime(2024, 3, 5, 13, 8, 15, tzinfo=UTC)),
        ("@every 1d", datetime(2024, 3, 6, tzinfo=UTC)),
    ],
)
def test_next_after(spec: str, expected: datetime) -> None:
    assert parse_schedule(spec).next_after(T0) == expected


def test_next_after_is_strictly_later_and_utc() -> None:
    every = parse_schedule("@every 4h")
    on_the_dot = datetime(2024, 3, 5, 16, 0, tzinfo=UTC)
    assert every.next_after(on_the_dot) == on_the_dot + timedelta(hours=4)
    assert parse_schedule("@hourly").next_after(on_the_dot) == on_the_dot + timedelta(hours=1)
    local = T0.astimezone(timezone(timedelta(hours=2)))
    result = parse_schedule("@daily").next_after(local)
    assert result == datetime(2024, 3, 6, tzinfo=UTC)
    assert result.utcoffset() == timedelta(0)


def test_schedule_spec_shape() -> None:
    assert parse_schedule("@every 30m").interval == timedelta(minutes=30)
    assert parse_schedule("  @daily ").cron == "0 0 * * *"
    assert parse_schedule("0  3 * * *").cron == "0 3 * * *"


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "@often",
        "@every",
        "@every 0m",
        "@every 5",
        "@every 5w",
        "* * * *",
        "* * * * * *",
        "61 * * * *",
        "0 0 30 2 *",
        "every 5m",
    ],
)
def test_bad_schedules(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_schedule(spec)


def test_next_after_needs_aware_datetime() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_schedule("@daily").next_after(datetime(2024, 1, 1))


# -- API sources (issue 8) ---------------------------------------------------------------------

API_SOURCE = """\
name: shop-api
api:
  preset: graphql
  url: http://127.0.0.2:8801/graphql
  pagination:
    per_page: 50
  mapping:
    fields:
      currency: "'EUR'"
"""


def test_api_source_needs_no_seeds_and_merges_its_preset() -> None:
    source = load_source_text(API_SOURCE, filename="api.yaml")
    api = source.api
    assert api is not None and api.mapping is not None and api.graphql is not None
    assert api.method == "POST" and api.pagination.per_page == 50
    assert api.pagination.total == "data.products.totalCount"  # from the preset
    assert api.mapping.fields["currency"] == "'EUR'" and api.mapping.fields["key"] == "id"
    assert effective_allowed_domains(source) == ["127.0.0.2:8801"]
    # Stored and reloaded (the job's copy): the same source.
    assert source_from_dict(source_to_dict(source)) == source


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: a\napi:\n  url: http://a.test/x?p={pag}\n"
            "  mapping: {items: i, fields: {key: id}}\n",
            "demo.yaml:2: api: unknown placeholder {pag}",
        ),
        (
            "name: a\napi:\n  url: http://a.test/x?p={page}\n"
            "  mapping: {items: 'a[', fields: {key: id}}\n",
            'demo.yaml:4: api.mapping.items: "a[" is not a valid JMESPath expression',
        ),
        (
            "name: a\napi:\n  url: http://a.test/x?p={page}\n"
            "  mapping:\n    items: i\n    fields: {key: id, prise: p}\n",
            'demo.yaml:6: api.mapping.fields.prise: "prise" is not a product field '
            '(did you mean "price"?)',
        ),
        (
            "name: a\napi:\n  url: http://a.test/x\n  mapping: {items: i, fields: {key: id}}\n",
            "api.pagination.strategy: strategy page needs the {page} placeholder",
        ),
        (
            "name: a\napi:\n  url: http://a.test/x?c={cursor}\n"
            "  pagination: {strategy: cursor}\n  mapping: {items: i, fields: {key: id}}\n",
            "demo.yaml:4: api.pagination: strategy cursor needs next_cursor",
        ),
        (
            "name: a\napi:\n  url: http://a.test/x?p={page}\n  pagination: {per_page: 0}\n"
            "  mapping: {items: i, fields: {key: id}}\n",
            "demo.yaml:4: api.pagination.per_page: 0 must be in 1..10_000",
        ),
        (
            "name: a\napi:\n  url: http://a.test/x?p={page}\n"
            "  mapping: {items: i, fields: {name: n}}\n",
            'demo.yaml:4: api.mapping.fields: map "key"',
        ),
        (
            "name: a\napi:\n  url: http://a.test/x?p={page}\n",
            'demo.yaml:2: api: missing "mapping"',
        ),
        (
            "name: a\napi:\n  url: ftp://a.test/{page}\n  mapping: {items: i, fields: {key: id}}\n",
            'demo.yaml:3: api.url: "ftp://a.test/{page}" is not an http(s) URL',
        ),
        (
            "name: a\napi:\n  url: http://a.test/x?p={page}\n  body: {q: 1}\n"
            "  mapping: {items: i, fields: {key: id}}\n",
            "demo.yaml:2: api.method: a request with a body needs method: POST",
        ),
        (
            "name: a\napi:\n  url: http://a.test/x?p={page}\n"
            "  mapping: {items: i, fields: {key: id, currency: '`EUR`'}}\n",
            "api.mapping.fields.currency: \"`EUR`\": write a constant string as 'text'",
        ),
        (
            "name: a\napi:\n  preset: magento\n",
            'demo.yaml:3: api.preset: expected one of "shopify", "graphql", got "magento"',
        ),
    ],
)
def test_api_errors_name_line_and_field(text: str, expected: str) -> None:
    assert expected in error_of(text)


def test_a_preset_of_the_wrong_type_is_a_clear_error_not_a_crash() -> None:
    from shared.errors import SourceError
    from shared.sources import source_from_dict

    with pytest.raises(SourceError, match="preset"):
        source_from_dict({"name": "a", "seeds": ["http://a.test/"], "api": {"preset": {}}})


# -- hostile definitions (issue 17): refused fast with a clear error, never a crash -----------
ALIAS_BOMB = "name: a\nseeds: [http://a.test]\napi:\n  url: http://a.test/api\n  method: POST\n"
ALIAS_BOMB += '  body:\n    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
for _i, (_name, _prev) in enumerate(zip("bcdefghi", "abcdefgh", strict=True)):
    ALIAS_BOMB += f"    {_name}: &{_name} [{','.join(['*' + _prev] * 9)}]\n"


def test_the_yaml_alias_bomb_is_refused_before_it_expands() -> None:
    assert len(ALIAS_BOMB.encode()) < 700
    message = error_of(ALIAS_BOMB)
    assert "aliases expand to 490,329,077 nodes" in message and "at most 10,000 more" in message


def test_a_few_aliases_are_fine_and_a_cycle_is_not() -> None:
    text = "name: a\nseeds: &s [http://a.test/x]\nsitemaps: *s\n"
    assert load_source_text(text).sitemaps == ["http://a.test/x"]
    cyclic = "name: a\nseeds: [http://a.test]\napi: {url: 'http://a.test/', body: &b {x: [*b]}}\n"
    assert "cycle" in error_of(cyclic)


@pytest.mark.parametrize("depth", [65, 400, 5000])
def test_yaml_nested_too_deep_is_refused(depth: int) -> None:
    text = "name: a\nseeds: [http://a.test]\nx: " + "[" * depth + "]" * depth + "\n"
    assert error_of(text) == "demo.yaml: refused YAML: nested deeper than 64 levels"


@pytest.mark.parametrize("depth", [65, 50_000])
def test_json_nested_too_deep_is_refused(depth: int) -> None:
    text = '{"name": "a", "x": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(SourceError, match="nested deeper than 64 levels"):
        load_source_text(text, fmt="json")
    if depth < 900:  # already decoded (an API body): the same limit
        deep = {"name": "a", "api": {"body": json.loads("[" * depth + "]" * depth)}}
        with pytest.raises(SourceError, match="nested deeper than 64 levels"):
            source_from_dict(deep)


def test_a_control_character_names_its_line() -> None:
    text = "name: a\nseeds: [http://a.test]\nlocale: en\x95\n"
    assert error_of(text) == "demo.yaml:3: invalid YAML: control character U+0095"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("allowed_domains: ['[']", 'demo.yaml:3: allowed_domains[0]: "[" is not host[:port]'),
        ("sitemaps: ['http://[']", 'demo.yaml:3: sitemaps[0]: "http://[" is not a valid URL'),
        (
            "max_bytes: 1000000000000",
            "demo.yaml:3: max_bytes: 1000000000000 must be in 1..268_435_456",
        ),
        ("timeout: 1.0e+9", "demo.yaml:3: timeout: 1000000000.0 must be > 0 and ≤ 600"),
        ("pacing: {max_in_flight: 100000}", "demo.yaml:3: pacing.max_in_flight: 100000 must be"),
        ("links: {max_depth: 99999999}", "demo.yaml:3: links.max_depth: 99999999 must be in"),
        ("retry: {cap: 1.0e+300}", "demo.yaml:3: retry.cap: 1e+300 must be > 0 and ≤ 2_592_000"),
    ],
)
def test_out_of_bounds_values_name_line_and_field(text: str, expected: str) -> None:
    assert expected in error_of(f"name: a\nseeds: [http://a.test]\n{text}\n")


def test_verify_before_alerting_settings() -> None:
    on = load(MINIMAL).verification()
    assert on is not None and on.price_threshold() == 30.0 and on.out_of_stock and on.delisted
    assert load(MINIMAL + "verify: false\n").verification() is None
    custom = load(MINIMAL + "verify: {price_change: 12.5%, delisted: false}\n").verification()
    assert custom is not None and custom.price_threshold() == 12.5 and not custom.delisted
    assert load(MINIMAL + "verify: {price_change: 50}\n").verification().price_threshold() == 50
    for bad in ("0%", "abc", "-5", "inf", "2000%"):
        message = error_of(MINIMAL + f"verify: {{price_change: {bad!r}}}\n")
        assert "demo.yaml:3: verify.price_change:" in message and "like 30%" in message, message
    assert "verify.out_of_stock" in error_of(MINIMAL + "verify: {out_of_stock: maybe}\n")
