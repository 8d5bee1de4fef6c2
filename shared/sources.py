"""Loading and validating source definitions (YAML or JSON) into ``schemas.source.Source``.

Every problem is reported as ``file:line: field.path: what is wrong``. Types are checked by
msgspec; its error path (``$.pacing.min_delay``) is mapped back to a line through a small
position tree built from the YAML node graph or a scan of the JSON text. Semantic checks (URLs,
regexes, ranges, schedules) run after conversion and report every problem at once.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import re
import types
import warnings
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal, NoReturn, Union, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

import jmespath
import jmespath.exceptions
import msgspec
import yaml

from schemas.messages import Product
from schemas.source import API_PRESETS, LinkRule, Source, Verify
from shared.alert_rules import spec_problems
from shared.errors import SourceError
from shared.nesting import MAX_DEPTH, TooComplex, check_depth, check_yaml_graph
from shared.schedule_spec import parse_schedule
from shared.urls import host_of

FieldPath = tuple[str | int, ...]


class RefusedDocument(SourceError):
    """The document is refused before validation: nested too deep or its aliases expand too
    far. Not a mistake to list with the others: nothing in it was looked at."""


NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_LOCALE_RE = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*")
_PERCENT_RE = re.compile(r"\s*\d+(\.\d+)?\s*")
_HOST_RE = re.compile(
    r"(?i)(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?"
)


# -- public API --------------------------------------------------------------------------------


def load_source_file(path: str | Path) -> Source:
    """Load a ``.json`` file as JSON and anything else (``.yaml``, ``.yml``, …) as YAML."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SourceError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise SourceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    fmt = "json" if path.suffix.lower() == ".json" else "yaml"
    return load_source_text(text, filename=str(path), fmt=fmt)


def load_source_text(text: str, *, filename: str = "<source>", fmt: str = "yaml") -> Source:
    """Parse and validate a source definition; ``fmt`` is ``yaml`` (or ``yml``) or ``json``."""
    if fmt == "json":
        data, pos = _parse_json(text, filename)
    elif fmt in ("yaml", "yml"):
        data, pos = _parse_yaml(text, filename)
    else:
        raise ValueError(f"unknown source format {fmt!r} (use 'yaml' or 'json')")
    return _build(data, pos, filename)


def source_from_dict(data: dict) -> Source:
    """Validate already-decoded data (JSON from Postgres or an API body); no line numbers."""
    return _build(data, None, None)


def source_to_dict(source: Source) -> dict:
    """Plain JSON-compatible data; ``source_from_dict`` turns it back into an equal Source."""
    return msgspec.to_builtins(source)


def effective_allowed_domains(source: Source) -> list[str]:
    """``allowed_domains`` if given, else the hosts (``host[:port]``) of seeds, search URL and
    sitemaps, lower-cased, default ports dropped, in order of first appearance, each followed by
    its ``www.`` twin: a site on both spellings is one site (its pagers link either way)."""
    if source.allowed_domains:
        return list(dict.fromkeys(d.lower() for d in source.allowed_domains))
    urls = list(source.seeds)
    if source.search is not None:
        urls.append(source.search.url)
    if isinstance(source.sitemaps, list):  # sitemap-only sources need their host too
        urls.extend(source.sitemaps)
    if source.api is not None and source.api.url:
        urls.append(source.api.url)
    hosts = [h for h in map(host_of, urls) if h]  # the spelling Admission compares with
    return list(dict.fromkeys(t for h in hosts for t in (h, _www_twin(h)) if t))


def _www_twin(host: str) -> str | None:
    """``www.shop.test`` for ``shop.test`` and the reverse; None for an address or a bare name."""
    name, _, port = host.partition(":")
    if "." not in name or name.replace(".", "").isdigit() or name.startswith("["):
        return None
    twin = name[4:] if name.startswith("www.") else f"www.{name}"
    if "." not in twin:
        return None
    return f"{twin}:{port}" if port else twin


# -- positions: which line each value came from ------------------------------------------------


@dataclass
class _Pos:
    line: int
    keys: dict[str, tuple[int, _Pos]] = field(default_factory=dict)  # key → (key line, value)
    items: list[_Pos] = field(default_factory=list)


@dataclass(frozen=True)
class _Problem:
    path: FieldPath  # where the line comes from
    message: str
    of_parent: bool = False  # about a key itself (unknown, duplicate): name the parent's path


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads ``[http://x/c?page=1, …]`` as YAML 1.2 does.

    PyYAML ends a plain scalar at ``?`` inside flow collections (a YAML 1.1 rule), so URL lists
    written inline fail to parse. This is PyYAML's ``scan_plain`` with only ``?`` removed from
    the flow terminators; ``?`` still starts a complex key where an indicator is expected.
    """

    def scan_plain(self) -> yaml.ScalarToken:
        chunks: list[str] = []
        start_mark = end_mark = self.get_mark()
        indent = self.indent + 1
        spaces: list[str] = []
        blank = "\0 \t\r\n\x85\u2028\u2029"
        after_colon = blank + (",[]{}" if self.flow_level else "")
        while True:
            length = 0
            if self.peek() == "#":
                break
            while True:
                ch = self.peek(length)
                if (
                    ch in blank
                    or (ch == ":" and self.peek(length + 1) in after_colon)
                    or (self.flow_level and ch in ",[]{}")
                ):
                    break
                length += 1
            if length == 0:
                break
            self.allow_simple_key = False
            chunks.extend(spaces)
            chunks.append(self.prefix(length))
            self.forward(length)
            end_mark = self.get_mark()
            spaces = self.scan_plain_spaces(indent, start_mark) or []
            if not spaces or self.peek() == "#" or (not self.flow_level and self.column < indent):
                break
        return yaml.ScalarToken("".join(chunks), True, start_mark, end_mark)


def _parse_yaml(text: str, filename: str) -> tuple[Any, _Pos | None]:
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # the reader refuses control characters here
        node = loader.get_single_node()
        if node is not None:
            # Before anything walks the graph: the alias budget and the nesting limit.
            check_yaml_graph(node)
        duplicates = list(_yaml_duplicates(node, (), set())) if node is not None else []
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        problem = exc.problem or exc.context or "cannot parse"
        raise SourceError(f"{filename}{line}: invalid YAML: {problem}") from None
    except yaml.reader.ReaderError as exc:
        at = text.count("\n", 0, exc.position) + 1
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else "a byte"
        # Not text YAML reads at all (binary, or the wrong encoding): refused, not "invalid".
        msg = f"{filename}:{at}: invalid YAML: control character {char}"
        raise RefusedDocument(msg) from None
    except yaml.YAMLError as exc:
        raise SourceError(f"{filename}: invalid YAML: {exc}") from None
    except TooComplex as exc:
        raise RefusedDocument(f"{filename}: refused YAML: {exc}") from None
    except RecursionError:  # the composer recurses per level: far past MAX_DEPTH
        msg = f"{filename}: refused YAML: nested deeper than {MAX_DEPTH} levels"
        raise RefusedDocument(msg) from None
    finally:
        if loader is not None:
            loader.dispose()
    if node is None:
        return None, None
    pos = _yaml_positions(node, set())  # after construction: merge keys are flattened by then
    if duplicates:
        _raise(filename, pos, [_Problem(p, f'duplicate field "{p[-1]}"', True) for p in duplicates])
    return data, pos


def _yaml_duplicates(node: yaml.Node, path: FieldPath, seen: set[int]) -> Iterator[FieldPath]:
    if id(node) in seen:  # aliases can make the graph cyclic
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[str] = set()
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge" or not isinstance(key, yaml.ScalarNode):
                continue
            if key.value in keys:
                yield (*path, key.value)
            keys.add(key.value)
            yield from _yaml_duplicates(value, (*path, key.value), seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _yaml_duplicates(item, (*path, i), seen)


def _yaml_positions(node: yaml.Node, seen: set[int]) -> _Pos:
    pos = _Pos(node.start_mark.line + 1)
    if id(node) in seen:
        return pos
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                pos.keys[key.value] = (key.start_mark.line + 1, _yaml_positions(value, seen))
    elif isinstance(node, yaml.SequenceNode):
        pos.items = [_yaml_positions(item, seen) for item in node.value]
    return pos


_WS = re.compile(r"[ \t\n\r]*")


def _parse_json(text: str, filename: str) -> tuple[Any, _Pos | None]:
    if not text.strip():
        return None, None
    try:
        data = json.loads(text)
        check_depth(data)
    except json.JSONDecodeError as exc:
        raise SourceError(f"{filename}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except (TooComplex, RecursionError):
        msg = f"{filename}: refused JSON: nested deeper than {MAX_DEPTH} levels"
        raise RefusedDocument(msg) from None
    return data, _json_positions(text)  # recursive, but the depth is bounded by now


def _json_positions(text: str) -> _Pos:
    """Walk text that ``json.loads`` accepted, noting the line of every key and value."""
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]
    scalar = json.JSONDecoder().raw_decode  # a scalar or a key at i → (value, its end)

    def line(i: int) -> int:
        return bisect_left(newlines, i) + 1

    def skip(i: int) -> int:
        """Past the whitespace at ``i``."""
        match = _WS.match(text, i)  # ``*``: it always matches
        return match.end() if match else i

    def value(i: int) -> tuple[_Pos, int]:
        i = skip(i)
        pos = _Pos(line(i))
        if text[i] not in "{[":
            return pos, scalar(text, i)[1]
        close = "}" if text[i] == "{" else "]"
        i = skip(i + 1)
        if text[i] == close:
            return pos, i + 1
        while True:
            if close == "}":
                i = skip(i)
                key_line = line(i)
                key, i = scalar(text, i)
                i = skip(i) + 1  # past ':'
                child, i = value(i)
                pos.keys[key] = (key_line, child)  # the last duplicate wins, as in json.loads
            else:
                child, i = value(i)
                pos.items.append(child)
            i = skip(i)
            if text[i] == close:
                return pos, i + 1
            i += 1  # past ','

    return value(0)[0]


def _line(pos: _Pos | None, path: FieldPath) -> int | None:
    """Line of the deepest part of ``path`` that exists in the document."""
    if pos is None:
        return None
    line = pos.line
    for step in path:
        if isinstance(step, int):
            if not 0 <= step < len(pos.items):
                break
            pos = pos.items[step]
            line = pos.line
        else:
            if step not in pos.keys:
                break
            line, pos = pos.keys[step]
    return line


def _dotted(path: FieldPath) -> str:
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", step):
            out += f".{step}" if out else step
        else:
            out += f"[{json.dumps(step)}]"
    return out


def _raise(filename: str | None, pos: _Pos | None, problems: list[_Problem]) -> NoReturn:
    lines = []
    for problem in sorted(problems, key=lambda p: _line(pos, p.path) or 0):
        prefix = filename or ""
        line = _line(pos, problem.path)
        if line is not None:
            prefix += f":{line}"
        where = _dotted(problem.path[:-1] if problem.of_parent else problem.path)
        text = f"{where}: {problem.message}" if where else problem.message
        lines.append(f"{prefix}: {text}" if prefix else text)
    raise SourceError("\n".join(lines))


# -- types: msgspec's verdict, said in the file's terms ----------------------------------------

_AT_RE = re.compile(r"(?P<msg>.*?)(?: - at `(?P<at>[^`]*)`(?: in `(?P<in>[^`]*)`)?)?", re.S)
_STEP_RE = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


def _build(data: Any, pos: _Pos | None, filename: str | None) -> Source:
    if data is None:
        _raise(filename, None, [_Problem((), "empty source definition (needs name and seeds)")])
    if not isinstance(data, dict):
        msg = f"expected a mapping of fields at the top level, got {_show(data)}"
        _raise(filename, pos, [_Problem((), msg)])
    try:
        check_depth(data)  # data from an API body or Postgres has not been checked yet
    except TooComplex as exc:
        raise RefusedDocument(f"{filename}: {exc}" if filename else str(exc)) from None
    data = _with_preset(data)
    try:
        source = msgspec.convert(data, Source)
    except msgspec.ValidationError as exc:
        _raise(filename, pos, [_type_problem(str(exc), data)])
    except UnicodeError:  # lone surrogates from "\udXXX" escapes
        _raise(filename, pos, [_Problem((), "text is not valid Unicode")])
    problems = list(_check(source))
    if problems:
        _raise(filename, pos, problems)
    return source


def _with_preset(data: dict) -> dict:
    """The ``api`` section merged over its preset's defaults (what the file gives wins)."""
    api = data.get("api")
    preset = api.get("preset") if isinstance(api, dict) else None
    if not isinstance(preset, str) or preset not in API_PRESETS:
        return data  # a wrong type is reported by the validation that follows
    return {**data, "api": _merge(API_PRESETS[preset], api)}


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: _merge(base.get(k), v) for k, v in over.items()}}
    return over


def _type_problem(error: str, data: Any) -> _Problem:
    match = _AT_RE.fullmatch(error)
    assert match is not None  # the pattern matches any text
    msg, at = match["msg"], match["at"] or "$"
    if match["in"]:  # "Expected `str` - at `key` in `$.fields`": a mapping key
        at, msg = match["in"], "field names must be strings"
        return _Problem(_resolve(at, data)[0], msg)
    path, value, tp = _resolve(at, data)
    if unknown := re.fullmatch(r"Object contains unknown field `(.*)`", msg):
        name = unknown[1]
        known = [f for b in _branches(tp) for f in getattr(b, "__struct_fields__", ())]
        hint = difflib.get_close_matches(name, known, n=1)
        suffix = f' (did you mean "{hint[0]}"?)' if hint else ""
        return _Problem((*path, name), f'unknown field "{name}"{suffix}', True)
    if missing := re.fullmatch(r"Object missing required field `(.*)`", msg):
        return _Problem(path, f'missing required field "{missing[1]}"')
    if msg.startswith(("Expected", "Invalid enum value")) and tp is not None:
        return _Problem(path, f"expected {_describe(tp)}, got {_show(value)}")
    return _Problem(path, msg[:1].lower() + msg[1:])


def _resolve(at: str, data: Any) -> tuple[FieldPath, Any, Any]:
    """Turn msgspec's ``$.a[0].b`` into a path, the value there and its declared type."""
    path: list[str | int] = []
    value, tp = data, Source
    for name, index in _STEP_RE.findall(at.removeprefix("$")):
        step: str | int
        if name:
            step = name
        elif index != "...":
            step = int(index)
        else:  # msgspec hides dict keys: find the entry that does not convert
            child = _child_type(tp, "")
            bad = [k for k, v in _items(value) if child is not None and not _converts(v, child)]
            step = bad[0] if bad else "?"
        tp = _child_type(tp, step)
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            value = None
        path.append(step)
    return tuple(path), value, tp


def _items(value: Any) -> list[tuple[Any, Any]]:
    return list(value.items()) if isinstance(value, dict) else []


def _converts(value: Any, tp: Any) -> bool:
    try:
        msgspec.convert(value, tp)
    except msgspec.ValidationError:
        return False
    return True


def _branches(tp: Any) -> tuple[Any, ...]:
    if get_origin(tp) in (Union, types.UnionType):
        return get_args(tp)
    return (tp,)


@cache
def _hints(struct: type) -> dict[str, Any]:
    return get_type_hints(struct)


def _child_type(tp: Any, step: str | int) -> Any:
    for branch in _branches(tp):
        origin = get_origin(branch)
        if isinstance(step, int) and origin is list:
            return get_args(branch)[0]
        if isinstance(step, str) and origin is dict:
            return get_args(branch)[1]
        if (
            isinstance(step, str)
            and isinstance(branch, type)
            and issubclass(branch, msgspec.Struct)
        ):
            return _hints(branch).get(step)
    return None


def _describe(tp: Any) -> str:
    parts: list[str] = []
    for branch in _branches(tp):
        origin = get_origin(branch)
        if branch is type(None):
            continue
        if origin is Literal:
            values = ", ".join(json.dumps(v) for v in get_args(branch))
            parts.append(values if len(get_args(branch)) == 1 else f"one of {values}")
        elif origin is list:
            parts.append("a list")
        elif origin is dict or (isinstance(branch, type) and issubclass(branch, msgspec.Struct)):
            parts.append("a mapping")
        else:
            names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
            parts.append(names.get(branch, getattr(branch, "__name__", str(branch))))
    return " or ".join(parts)


def _show(value: Any) -> str:
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 60 else text[:56] + '..."'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


# -- semantics ---------------------------------------------------------------------------------


def _check(s: Source) -> Iterator[_Problem]:
    if not NAME_RE.fullmatch(s.name):
        msg = (
            f"{_show(s.name)} is not a valid name (1-64 of a-z 0-9 . _ -, not starting with . _ -)"
        )
        yield _Problem(("name",), msg)
    if not s.seeds and s.search is None and not s.sitemaps and not (s.api and s.api.url):
        yield _Problem(("seeds",), "give at least one seed (or a search, sitemaps or an api)")
    for i, url in enumerate(s.seeds):
        yield from _url(("seeds", i), url)
    if isinstance(s.sitemaps, list):
        for i, url in enumerate(s.sitemaps):
            yield from _url(("sitemaps", i), url)
    if s.search is not None:
        if "{keyword}" not in s.search.url:
            yield _Problem(("search", "url"), "must contain the {keyword} placeholder")
        yield from _url(("search", "url"), s.search.url.replace("{keyword}", "x"), s.search.url)
        for i, keyword in enumerate(s.search.keywords):
            if not keyword.strip():
                yield _Problem(("search", "keywords", i), "must not be blank")
    for i, entry in enumerate(s.allowed_domains):
        if not _is_host_port(entry):
            msg = f"{_show(entry)} is not host[:port] (no scheme, no path)"
            yield _Problem(("allowed_domains", i), msg)
    if isinstance(s.allow_private, list):
        for i, net in enumerate(s.allow_private):
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError:
                yield _Problem(("allow_private", i), f"{_show(net)} is not an IP or CIDR network")
    yield from _links(s)
    for name, rule in s.fields.items():
        if not rule.css.strip():
            yield _Problem(("fields", name, "css"), "the CSS selector is empty")
    yield from _numbers(s)
    yield from _api(s)
    yield from _render(s)
    if not _LOCALE_RE.fullmatch(s.locale):
        yield _Problem(("locale",), f"{_show(s.locale)} is not a language tag like en-US")
    if s.refresh.schedule is not None:
        try:
            parse_schedule(s.refresh.schedule)
        except ValueError as exc:
            yield _Problem(("refresh", "schedule"), str(exc))
    yield from _alerts(s)
    yield from _verify(s)


def _alerts(s: Source) -> Iterator[_Problem]:
    """Each rule as ``trawl alerts add`` would check it; names (and unnamed rules) unique,
    since applying the file matches the stored rules by them."""
    seen: dict[object, int] = {}
    for i, spec in enumerate(s.alerts):
        for name, message in spec_problems(s.name, spec):
            yield _Problem(("alerts", i, name), message)
        identity = spec.name if spec.name is not None else msgspec.json.encode(spec)
        if identity in seen:
            what = f"the name {_show(spec.name)}" if spec.name is not None else "the same rule"
            yield _Problem(("alerts", i), f"{what} is already alerts[{seen[identity]}]")
        seen.setdefault(identity, i)


def _verify(s: Source) -> Iterator[_Problem]:
    if not isinstance(s.verify, Verify):
        return
    value = s.verify.price_change
    text = value.strip().removesuffix("%") if isinstance(value, str) else None
    try:
        threshold = float(text) if text is not None else float(value)
    except ValueError:
        threshold = math.nan
    if text is not None and not _PERCENT_RE.fullmatch(text):
        threshold = math.nan  # "inf", "1e3": a number Python reads, but no percentage
    if not (math.isfinite(threshold) and 0 < threshold <= 1000):
        msg = f"{_show(value)} must be a percentage > 0 and ≤ 1000, like 30%"
        yield _Problem(("verify", "price_change"), msg)


def _url(path: FieldPath, url: str, shown: str | None = None) -> Iterator[_Problem]:
    try:
        parts = urlsplit(url)
    except ValueError:  # "http://[" : an unclosed IPv6 bracket
        yield _Problem(path, f"{_show(shown or url)} is not a valid URL")
        return
    if parts.scheme not in ("http", "https") or not parts.hostname:
        yield _Problem(path, f"{_show(shown or url)} is not an http(s) URL")
        return
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        yield _Problem(path, f"{_show(shown or url)} has an invalid port")


def _is_host_port(entry: str) -> bool:
    if not entry or any(ch in entry for ch in "/?#@ \t\\") or entry.endswith(":"):
        return False
    try:
        parts = urlsplit("//" + entry)  # raises on "[" (an unclosed IPv6 bracket)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return False
    host = parts.hostname or ""
    if entry.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    return bool(_HOST_RE.fullmatch(host))


def _links(s: Source) -> Iterator[_Problem]:
    rules: list[tuple[str, LinkRule | None]] = [
        ("product", s.links.product),
        ("pagination", s.links.pagination),
    ]
    for name, rule in rules:
        if rule is None:
            continue
        if rule.css is None and rule.pattern is None:
            yield _Problem(("links", name), "give css, pattern or both")
        if rule.css is not None and not rule.css.strip():
            yield _Problem(("links", name, "css"), "the CSS selector is empty")
        if rule.pattern is not None:
            yield from _regex(("links", name, "pattern"), rule.pattern)
    for i, pattern in enumerate(s.links.deny):
        yield from _regex(("links", "deny", i), pattern)


# "prices.<list>" and "attributes.<name>" map named price lists and attributes.
_PRODUCT_FIELDS = (frozenset(Product.__struct_fields__) | {"availability", "stock"}) - {
    "prices",
    "attributes",
}


def _api(s: Source) -> Iterator[_Problem]:
    from shared.api_template import PLACEHOLDER, PLACEHOLDERS, template_strings, uses

    api = s.api
    if api is None:
        return
    if api.url is None and api.embedded is None:
        yield _Problem(("api",), "give url (an API listing), embedded (JSON in pages) or both")
    if api.url is not None:
        yield from _url(("api", "url"), PLACEHOLDER.sub("1", api.url), api.url)
    if api.body is not None and api.graphql is not None:
        yield _Problem(("api", "body"), "give body or graphql, not both")
    if api.body is not None and api.method == "GET":
        yield _Problem(("api", "method"), "a request with a body needs method: POST")
    for text in template_strings(api):
        for name in PLACEHOLDER.findall(text):
            if name not in PLACEHOLDERS:
                known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
                yield _Problem(("api",), f"unknown placeholder {{{name}}} (known: {known})")
    if api.embedded is not None and not api.embedded.strip():
        yield _Problem(("api", "embedded"), "the CSS selector is empty")
    for i, keyword in enumerate(api.keywords):
        if not keyword.strip():
            yield _Problem(("api", "keywords", i), "must not be blank")
    p = api.pagination
    if api.url is not None:
        needs = {"page": "page", "offset": "offset", "cursor": "cursor"}.get(p.strategy)
        if needs and not uses(api, needs):
            msg = f"strategy {p.strategy} needs the {{{needs}}} placeholder in url, body or graphql"
            yield _Problem(("api", "pagination", "strategy"), msg)
    if p.strategy == "cursor" and p.next_cursor is None:
        yield _Problem(("api", "pagination"), "strategy cursor needs next_cursor (a JMESPath)")
    for name in ("total", "next_cursor"):
        yield from _jmespath(("api", "pagination", name), getattr(p, name))
    m = api.mapping
    if m is None:
        yield _Problem(("api",), 'missing "mapping" (where the products are; or use a preset)')
        return
    yield from _jmespath(("api", "mapping", "items"), m.items)
    yield from _mapped(("api", "mapping", "fields"), m.fields)
    if m.variants is not None:
        yield from _jmespath(("api", "mapping", "variants", "path"), m.variants.path)
        yield from _jmespath(("api", "mapping", "variants", "option"), m.variants.option)
        yield from _mapped(("api", "mapping", "variants", "fields"), m.variants.fields)
    if "key" not in m.fields and not (m.variants and "key" in m.variants.fields):
        yield _Problem(("api", "mapping", "fields"), 'map "key" (what identifies a product)')


def _mapped(path: FieldPath, fields: dict[str, str]) -> Iterator[_Problem]:
    for name, expression in fields.items():
        named_list = name.partition(".")[0] in ("prices", "attributes") and "." in name[:-1]
        if name not in _PRODUCT_FIELDS and not named_list:
            hint = difflib.get_close_matches(name, sorted(_PRODUCT_FIELDS), n=1)
            suffix = f' (did you mean "{hint[0]}"?)' if hint else ""
            yield _Problem((*path, name), f'"{name}" is not a product field{suffix}')
        yield from _jmespath((*path, name), expression)


def _jmespath(path: FieldPath, expression: str | None) -> Iterator[_Problem]:
    if expression is None:
        return
    try:
        with warnings.catch_warnings():
            # `EUR` (a bare literal) is deprecated JMESPath: say so instead of warning.
            warnings.simplefilter("error", PendingDeprecationWarning)
            jmespath.compile(expression)
    except PendingDeprecationWarning:
        msg = f"{_show(expression)}: write a constant string as 'text' (or `\"text\"`)"
        yield _Problem(path, msg)
    except jmespath.exceptions.JMESPathError as exc:
        reason = str(exc).splitlines()[0]
        yield _Problem(path, f"{_show(expression)} is not a valid JMESPath expression: {reason}")


def _render(s: Source) -> Iterator[_Problem]:
    r = s.render_options()
    if r is None:
        return
    if r.wait_for is not None and not r.wait_for.strip():
        yield _Problem(("render", "wait_for"), "the CSS selector is empty")
    if r.click is not None and not r.click.strip():
        yield _Problem(("render", "click"), "the CSS selector is empty")
    for i, host in enumerate(r.block_hosts):
        if not _is_host_port(host):
            yield _Problem(("render", "block_hosts", i), f"{_show(host)} is not a host name")
    if s.api is not None:
        yield _Problem(("render",), "an API source is not rendered: remove render or api")


def _regex(path: FieldPath, pattern: str) -> Iterator[_Problem]:
    try:
        with warnings.catch_warnings():  # e.g. FutureWarning on "[[" is not our user's error
            warnings.simplefilter("ignore")
            re.compile(pattern)
    except re.error as exc:
        yield _Problem(path, f"{_show(pattern)} is not a valid regex: {exc}")


DAY = 86400.0
# Bounds on every number a source author sets: each decides a size, a time or a count that
# trawl will honour, so an absurd one (``max_bytes: 1e12``, ``timeout: 1e9``) is refused with
# its line instead of becoming memory, a stuck job, or an overflow further down.
# (path, lower bound, lower bound allowed?, upper bound (inclusive)).
_BOUNDS: tuple[tuple[FieldPath, float, bool, float], ...] = (
    (("pacing", "min_delay"), 0, True, DAY),
    (("pacing", "max_delay"), 0, True, DAY),
    (("pacing", "max_in_flight"), 1, True, 256),
    (("pacing", "max_retry_after"), 0, True, 7 * DAY),
    (("retry", "max_retries"), 0, True, 20),
    (("retry", "base_delay"), 0, False, DAY),
    (("retry", "blocked_base_delay"), 0, False, 7 * DAY),
    (("retry", "factor"), 1, True, 10),
    (("retry", "jitter"), 0, True, 1),
    (("retry", "cap"), 0, False, 30 * DAY),
    (("refresh", "miss_threshold"), 1, True, 1000),
    (("refresh", "max_failure_rate"), 0, True, 1),
    (("links", "max_depth"), 0, True, 1000),
    (("links", "max_pagination"), 1, True, 100_000),
    (("timeout",), 0, False, 600),
    (("max_bytes",), 1, True, 256 * 1024 * 1024),
    (("api", "pagination", "per_page"), 1, True, 10_000),
    (("api", "pagination", "max_pages"), 1, True, 100_000),
    (("api", "pagination", "start"), 0, True, 1_000_000_000),
    (("api", "mapping", "in_stock_below"), 0, True, 1_000_000_000),
    # Only when render is a mapping (``render: true`` takes the defaults).
    (("render", "timeout"), 1, True, 300),
    (("render", "max_requests"), 0, True, 10_000),
    (("render", "max_bytes"), 0, True, 1024**3),
    (("render", "max_clicks"), 0, True, 1000),
    (("render", "scrolls"), 0, True, 1000),
)


def _numbers(s: Source) -> Iterator[_Problem]:
    for path, lo, lo_ok, hi in _BOUNDS:
        value: Any = s
        for step in path:
            value = getattr(value, str(step), None)
        if value is None:
            continue
        above_lo = value >= lo if lo_ok else value > lo
        if not (math.isfinite(value) and above_lo and value <= hi):
            rule = f"in {_num(lo)}..{_num(hi)}" if lo_ok else f"> {_num(lo)} and ≤ {_num(hi)}"
            yield _Problem(path, f"{_show(value)} must be {rule}")
    p = s.pacing
    if p.min_delay is not None and p.max_delay is not None and p.min_delay > p.max_delay >= 0:
        yield _Problem(
            ("pacing", "max_delay"), f"{p.max_delay!r} is below min_delay ({p.min_delay!r})"
        )


def _num(value: float) -> str:
    return f"{value:,.0f}".replace(",", "_") if value == int(value) else repr(value)
