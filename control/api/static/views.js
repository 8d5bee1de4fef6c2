// trawl dashboard pages and router: #/ overview (app.js), #/products, #/product/<source>/<key>,
// #/changes, #/jobs, #/job/<id>, #/sources, #/match. Each page renders into #view and sets
// body[data-ready] to its name when its data is on screen (what tests and the paint script
// wait for). Charts are uPlot (vendor/uplot), loaded on the first page that draws one.
"use strict";

const view = $("#view");
let current = { name: "", live: null }; // the page shown and its poll (if it has one)
let generation = 0; // a newer navigation makes an older page's late answers harmless

// -- small helpers ------------------------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

function table(id, heads, rows, render, emptyText) {
  const thead = h("thead", {}, h("tr", {}, heads.map((t) => {
    const [label, cls] = Array.isArray(t) ? t : [t, ""];
    return h("th", { scope: "col", class: cls || null }, label);
  })));
  const tbody = h("tbody");
  if (!rows.length) {
    tbody.append(h("tr", { class: "empty" }, h("td", { colspan: heads.length }, emptyText || "none")));
  }
  for (const row of rows) {
    const tr = h("tr");
    render(row, tr);
    tbody.append(tr);
  }
  return h("table", { id, "data-list": true }, thead, tbody);
}

function td(text, cls) { return cell(text, cls); }
function link(href, text) { return h("a", { href }, text); }
function productHref(p) {
  return "#/product/" + encodeURIComponent(p.source) + "/" + encodeURIComponent(p.key);
}
function money(value, currency) {
  if (value === null || value === undefined) return "";
  return value + (currency ? " " + currency : "");
}
function when(iso) { return iso ? new Date(iso).toLocaleString() : ""; }
function duration(secs) {
  if (!secs) return "";
  if (secs < 90) return secs.toFixed(1) + " s";
  if (secs < 5400) return (secs / 60).toFixed(1) + " min";
  return (secs / 3600).toFixed(1) + " h";
}
function stockClass(a) {
  return a === "in_stock" ? "ok" : a === "out_of_stock" ? "bad" : a ? "warn" : "";
}
function css(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
const SERIES = ["--series-1", "--series-2", "--series-3", "--series-4", "--series-5", "--series-6"];

function setPage(name, ...children) {
  view.replaceChildren(...children.filter((c) => c)); // a section a page may leave out is null
  view.hidden = false;
  $("#board").hidden = true;
  document.body.dataset.view = name;
}

function ready(name) {
  document.body.dataset.ready = name;
  performance.mark("ready:" + name); // bench/dashboard_bench.py reads when data was on screen
  $("#status").textContent = "updated " + new Date().toLocaleTimeString();
}

function failed(err) {
  if (err instanceof AuthError) { needLogin(); return; }
  $("#status").textContent = "error: " + err.message;
  view.append(h("p", { class: "notice bad", role: "alert" }, err.message));
}

// Query strings of the hash route (#/products?q=…).
function routeParams() {
  const q = location.hash.indexOf("?");
  return new URLSearchParams(q < 0 ? "" : location.hash.slice(q + 1));
}
function setRouteParams(path, params) {
  const clean = new URLSearchParams();
  for (const [k, v] of params) if (v !== "" && v !== null) clean.set(k, v);
  const qs = clean.toString();
  const target = "#" + path + (qs ? "?" + qs : "");
  if (location.hash !== target) location.hash = target;
  else route();
}

let uplotLoading = null;
function loadUplot() {
  if (window.uPlot) return Promise.resolve();
  if (!uplotLoading) {
    uplotLoading = new Promise((resolve, reject) => {
      document.head.append(h("link", { rel: "stylesheet", href: "/static/vendor/uplot/uPlot.min.css" }));
      const s = h("script", { src: "/static/vendor/uplot/uPlot.iife.min.js" });
      s.onload = resolve;
      s.onerror = () => reject(new Error("could not load the chart library"));
      document.head.append(s);
    });
  }
  return uplotLoading;
}

function axes() {
  const stroke = css("--muted"), grid = css("--line");
  const one = { stroke, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  return [Object.assign({}, one), Object.assign({}, one)];
}

// A uPlot chart in `box`; box.dataset.points counts the points drawn (tests read it).
function chart(box, title, series, data, opts) {
  const width = Math.max(320, box.clientWidth || view.clientWidth - 40);
  // One point in time would make uPlot span years around it: a minute either side instead.
  const x = { time: true, range: (u, min, max) => (min === max ? [min - 60, max + 60] : [min, max]) };
  const plot = new uPlot(Object.assign({
    title, width, height: 300, series, axes: axes(), scales: { x },
    cursor: { drag: { x: true, y: false } },
  }, opts || {}), data, box);
  let points = 0;
  for (let i = 1; i < data.length; i++) points += data[i].filter((v) => v !== null && v !== undefined).length;
  box.dataset.points = String(points);
  return plot;
}

// Keyboard: j/k move through the items of a list (a table's rows, a diff's hunks), Enter
// opens the item's link, "/" focuses the page's search box. Links and buttons are ordinary tab
// stops as well. Lists are marked data-list (table() marks every table); j/k work in the list
// that holds the focus, else in the page's data-main list, else its first list with items.
function listItems(list) {
  const items = list.tagName === "TABLE" ? list.querySelectorAll("tbody tr:not(.empty)") : list.querySelectorAll("[data-item]");
  return [...items];
}
function visibleLists() {
  const area = view.hidden ? $("#board") : view;
  return area.hidden ? [] : [...area.querySelectorAll("[data-list]")].filter((l) => listItems(l).length);
}
function moveInList(step) {
  const lists = visibleLists();
  const list = lists.find((l) => l.contains(document.activeElement))
    || lists.find((l) => l.hasAttribute("data-main")) || lists[0];
  if (!list) return false;
  const items = listItems(list);
  const at = items.findIndex((r) => r.contains(document.activeElement));
  focusItem(items[at < 0 ? 0 : Math.max(0, Math.min(items.length - 1, at + step))], true);
  return true;
}
document.addEventListener("keydown", (ev) => {
  const tag = (ev.target.tagName || "").toLowerCase();
  if (["input", "select", "textarea"].includes(tag) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (ev.key === "/") {
    const search = view.hidden ? null : view.querySelector("input[type=search]");
    if (search) { ev.preventDefault(); search.focus(); }
    return;
  }
  if (ev.key === "Enter" && ev.target.matches && ev.target.matches("[data-list] tr, [data-item]")) {
    const a = ev.target.querySelector("a[href]");
    if (a) { ev.preventDefault(); a.click(); }
    return;
  }
  if ((ev.key === "j" || ev.key === "k") && moveInList(ev.key === "j" ? 1 : -1)) ev.preventDefault();
});

// A live page redraws itself whole: the focused item of a list keeps its place.
function focusedItem() {
  const list = document.activeElement && document.activeElement.closest("[data-list][id]");
  if (!list) return null;
  return { id: list.id, index: listItems(list).findIndex((r) => r.contains(document.activeElement)) };
}
function refocus(kept) {
  if (!kept || kept.index < 0) return;
  const list = document.getElementById(kept.id);
  const items = list ? listItems(list) : [];
  if (items.length) focusItem(items[Math.min(kept.index, items.length - 1)], false);
}

// -- Products ---------------------------------------------------------------------------------
const AVAILABILITY = ["in_stock", "out_of_stock", "preorder", "backorder", "limited", "discontinued", "unknown"];

async function productsPage(gen) {
  const p = routeParams();
  const sources = await api("/api/sources").catch(() => []);
  const form = h("form", { class: "filters", role: "search", onsubmit: (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    setRouteParams("/products", [...f.entries()]);
  } },
  h("label", {}, "Search", h("input", { type: "search", name: "q", value: p.get("q") || "", placeholder: "name, sku or key" })),
  h("label", {}, "Source", h("select", { name: "source" }, h("option", { value: "" }, "all"),
    sources.map((s) => h("option", { value: s.name, selected: p.get("source") === s.name }, s.name)))),
  h("label", {}, "Availability", h("select", { name: "availability" }, h("option", { value: "" }, "any"),
    AVAILABILITY.map((a) => h("option", { value: a, selected: p.get("availability") === a }, a.replaceAll("_", " "))))),
  h("label", {}, "Changed", h("select", { name: "changed_within" }, h("option", { value: "" }, "any time"),
    [[1, "last hour"], [24, "last day"], [168, "last week"]].map(([v, t]) =>
      h("option", { value: v, selected: p.get("changed_within") === String(v) }, t)))),
  h("label", {}, "Alerts", h("select", { name: "has_alerts" }, h("option", { value: "" }, "any"),
    [["true", "with alerts"], ["false", "without"]].map(([v, t]) =>
      h("option", { value: v, selected: p.get("has_alerts") === v }, t)))),
  h("label", {}, "Sort", h("select", { name: "sort" },
    [["key", "source, key"], ["name", "name"], ["price", "price"], ["updated", "recently updated"]].map(([v, t]) =>
      h("option", { value: v, selected: (p.get("sort") || "key") === v }, t)))),
  h("button", { type: "submit" }, "Apply"));
  const q = new URLSearchParams();
  for (const k of ["q", "source", "availability", "changed_within", "has_alerts", "sort", "cursor"]) {
    if (p.get(k)) q.set(k, p.get(k));
  }
  q.set("limit", "50");
  q.set("total", "false"); // rows first; the count (a scan of every match) follows
  const page = await api("/api/catalog/products?" + q);
  if (gen !== generation) return;
  const rows = table("products", ["source", "key", "name", ["price", "num"], ["sale", "num"], "availability", "last seen"],
    page.items, (r, tr) => {
      tr.append(td(r.source), h("td", {}, link(productHref(r), r.key)), td(r.name, "wrap"),
        td(money(r.price, r.currency), "num"), td(money(r.sale_price, r.currency), "num"),
        td((r.availability || "").replaceAll("_", " "), stockClass(r.availability)), td(ago(r.last_seen_at)));
    }, "no product matches");
  rows.dataset.main = "";
  const back = () => history.back();
  const next = () => {
    const np = new URLSearchParams(p);
    np.set("cursor", page.next_cursor);
    setRouteParams("/products", [...np.entries()]);
  };
  setPage("products", h("section", {},
    h("h2", {}, "Products ", h("span", { class: "muted", id: "products-total" })),
    form, rows,
    h("div", { class: "pager" },
      h("button", { type: "button", onclick: back, disabled: !p.get("cursor") }, "← Previous"),
      h("button", { type: "button", id: "next-page", onclick: next, disabled: !page.next_cursor }, "Next →"))));
  ready("products");
  if (!p.get("cursor")) {
    q.set("total", "true");
    q.set("limit", "1");
    const counted = await api("/api/catalog/products?" + q);
    if (gen === generation) $("#products-total").textContent = counted.total.toLocaleString() + (counted.total === 1 ? " product" : " products");
  }
}

// -- Product --------------------------------------------------------------------------------------
async function productPage(gen, source, key) {
  const base = "/api/products/" + encodeURIComponent(source) + "/" + encodeURIComponent(key) + "/history";
  let hist = await api(base);
  const points = hist.points.slice();
  while (hist.next_cursor) { // a long history comes in pages; the chart wants all of it
    hist = await api(base + "?cursor=" + encodeURIComponent(hist.next_cursor));
    points.push(...hist.points);
  }
  const product = hist.product, variants = hist.variants || [];
  const label = variantLabels(product, variants);
  await loadUplot();
  if (gen !== generation) return;
  const box = h("div", { class: "chart", id: "price-chart", role: "img",
    "aria-label": "price and sale price over time; shaded: out of stock" });
  const pagePanel = h("div", { id: "page-panel" });
  const facts = h("dl", { class: "facts" },
    [["source", product.source], ["key", product.key], ["price", money(product.price, product.currency)],
     ["sale price", money(product.sale_price, product.currency)], ["availability", product.availability],
     ["gtin", product.gtin], ["first seen", when(product.first_seen_at)], ["last seen", when(product.last_seen_at)]]
      .filter(([, v]) => v).map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))));
  const changes = table("changes", ["when", "job", ["price", "num"], ["sale", "num"], "availability", "variant", "page"],
    points.slice().reverse(), (pt, tr) => {
      const open = pt.payload_ref ? h("button", { type: "button",
        onclick: (ev) => showPage(pagePanel, pt.payload_ref, ev.currentTarget) }, "raw") : null;
      const diff = pt.payload_ref && pt.previous_ref ? h("button", { type: "button",
        onclick: (ev) => showDiff(pagePanel, pt.previous_ref, pt.payload_ref, ev.currentTarget) }, "diff") : null;
      tr.append(td(when(pt.observed_at)), h("td", {}, pt.job_id ? link("#/job/" + pt.job_id, "#" + pt.job_id) : ""),
        td(money(pt.price, pt.currency), "num"), td(money(pt.sale_price, pt.currency), "num"),
        td((pt.availability || "").replaceAll("_", " "), stockClass(pt.availability)),
        td(pt.variant_key ? label(pt.variant_key) : ""),
        h("td", {}, open, " ", diff));
    }, "no change recorded");
  changes.dataset.main = "";
  const variantRows = variants.length ? h("section", {}, h("h2", {}, "Variants"),
    table("variants", ["variant", "key", ["price", "num"], ["sale", "num"], "availability"], variants, (v, tr) => {
      tr.append(td(label(v.key)), h("td", {}, link(productHref(v), v.key)), td(money(v.price, v.currency), "num"),
        td(money(v.sale_price, v.currency), "num"),
        td((v.availability || "").replaceAll("_", " "), stockClass(v.availability)));
    })) : null;
  setPage("product", h("section", {},
    h("h2", {}, product.name || product.key, " ", product.url ? h("a", { href: product.url, rel: "noreferrer", target: "_blank" }, "↗") : ""),
    facts, box),
  variantRows,
  h("section", {}, h("h2", {}, "Changes"), changes, pagePanel));
  drawHistory(box, product, points, label);
  ready("product");
}

// A variant's name on the chart and in the tables: its attributes (size, colour), else its
// key after the product's ("P1#P1-2" → "P1-2").
function variantLabels(product, variants) {
  const names = new Map(variants.map((v) => {
    const attrs = Object.values(v.attributes || {}).join(" / ");
    return [v.key, attrs || v.key.replace(product.key + "#", "")];
  }));
  return (key) => names.get(key) || key.replace(product.key + "#", "");
}

// Stepped lines: a price holds until the next snapshot changes it. The product's own price and
// sale price, then one series per variant, the price paid (its sale price when it has one,
// as the change events count it): two lines a variant would double the legend for little.
// Stock as shaded bands where the product was not in stock (its own snapshots: it is in stock
// while any variant is).
function drawHistory(box, product, points, label) {
  const now = Date.now() / 1000;
  const t = (p) => Date.parse(p.observed_at) / 1000;
  const xs = [...new Set(points.map(t))].sort((a, b) => a - b);
  if (!xs.length || xs[xs.length - 1] < now) xs.push(now); // the last state holds until now
  const index = new Map(xs.map((x, i) => [x, i]));
  const num = (v) => (v === null || v === undefined ? null : Number(v));
  // One array per line, the value at each snapshot's time and carried on to now.
  const line = (pts, value) => {
    const ys = xs.map(() => null);
    for (const p of pts) ys[index.get(t(p))] = num(value(p));
    if (pts.length && ys[xs.length - 1] === null) ys[xs.length - 1] = num(value(pts[pts.length - 1]));
    return ys;
  };
  const stepped = (label, colour, extra) => Object.assign({ label, stroke: css(colour), width: 2, spanGaps: true,
    paths: uPlot.paths.stepped({ align: 1 }), points: { show: true, size: 6 } }, extra || {});
  const own = points.filter((p) => !p.variant_key);
  const series = [{}], data = [xs];
  if (own.length) {
    series.push(stepped("price", SERIES[0]), stepped("sale price", SERIES[1], { dash: [6, 4] }));
    data.push(line(own, (p) => p.price), line(own, (p) => p.sale_price));
  }
  const keys = [...new Set(points.filter((p) => p.variant_key).map((p) => p.variant_key))].sort();
  keys.forEach((key, i) => {
    series.push(stepped(label(key), SERIES[(i + 2) % SERIES.length]));
    data.push(line(points.filter((p) => p.variant_key === key), (p) => p.sale_price ?? p.price));
  });
  // Availability between snapshots: a state holds until the next snapshot says otherwise.
  const stockOf = own.length ? own : points;
  const avail = [];
  let state = null;
  for (let i = 0; i < xs.length; i++) {
    const at = stockOf.filter((p) => t(p) === xs[i]);
    if (at.length) state = at.some((p) => p.availability === "in_stock") ? "in_stock" : at[0].availability;
    avail.push(state);
  }
  const bands = (u) => {
    const ctx = u.ctx;
    ctx.save();
    for (let i = 0; i < xs.length - 1; i++) {
      if (!avail[i] || avail[i] === "in_stock") continue;
      const x0 = u.valToPos(xs[i], "x", true), x1 = u.valToPos(xs[i + 1], "x", true);
      ctx.fillStyle = avail[i] === "out_of_stock" ? css("--band-out") : css("--band-unknown");
      ctx.fillRect(x0, u.bbox.top, Math.max(1, x1 - x0), u.bbox.height);
    }
    ctx.restore();
  };
  chart(box, (product.currency ? product.currency + " · " : "") + "price history", series, data,
    { hooks: { drawClear: [bands] } });
  box.dataset.bands = String(avail.filter((a) => a && a !== "in_stock").length);
  box.dataset.series = String(series.length - 1);
}

// The stored page and the diff open below the changes, take the focus (so j/k walk the diff's
// hunks at once), and Escape hands it back to the button that opened them.
function openPanel(panel, opener, ...children) {
  panel.replaceChildren(...children.filter((c) => c));
  panel.onkeydown = (ev) => { if (ev.key === "Escape" && opener) { ev.preventDefault(); opener.focus(); } };
  const first = panel.querySelector("[tabindex]");
  if (first) first.focus();
}

async function showPage(panel, ref, opener) {
  panel.replaceChildren(h("p", { class: "muted" }, "loading " + ref + "…"));
  try {
    const text = await (await request("/api/payloads/" + encodeURIComponent(ref) + "/data")).text();
    // Shown as text, never rendered: a stored page must not run on the dashboard's origin.
    openPanel(panel, opener, h("h2", {}, "Stored page ", h("code", {}, ref)),
      h("pre", { class: "page", id: "raw-page", tabindex: 0, "aria-label": "stored page " + ref }, text.slice(0, 200000)));
  } catch (err) { panel.replaceChildren(h("p", { class: "bad" }, err.message)); }
}

// A unified diff as a list of hunks ("@@" lines start each), added and removed lines marked.
function hunks(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (line.startsWith("@@") || !out.length) out.push([]);
    out[out.length - 1].push(line);
  }
  return out.map((lines, i) => h("pre", { class: "page hunk", "data-item": true, "aria-label": "hunk " + (i + 1) },
    lines.map((l) => h("span", { class: l.startsWith("+") && !l.startsWith("+++") ? "add"
      : l.startsWith("-") && !l.startsWith("---") ? "del" : null }, l + "\n"))));
}

async function showDiff(panel, a, b, opener) {
  panel.replaceChildren(h("p", { class: "muted" }, "diffing…"));
  try {
    const d = await api("/api/payloads/diff?a=" + encodeURIComponent(a) + "&b=" + encodeURIComponent(b));
    const fields = Object.entries(d.product_changes || {});
    const text = typeof d.diff === "string" ? d.diff : JSON.stringify(d, null, 2);
    openPanel(panel, opener, h("h2", {}, "Diff against the previous crawl"),
      fields.length ? table("diff-fields", ["field", "before", "after"], fields, ([f, v], tr) =>
        tr.append(td(f), td(JSON.stringify(v.a), "wrap"), td(JSON.stringify(v.b), "wrap"))) : null,
      h("div", { id: "page-diff", "data-list": true, tabindex: 0, "aria-label": "diff, j and k move between hunks" },
        text ? hunks(text) : h("p", { class: "muted" }, "(no difference)")),
      d.diff_truncated ? h("p", { class: "muted" }, "(diff truncated)") : null);
  } catch (err) { panel.replaceChildren(h("p", { class: "bad" }, err.message)); }
}

// -- Changes feed -----------------------------------------------------------------------------
// /api/changes lists product change events; with before= they come newest first, paged by
// the id of the oldest shown. A 404 (an API without the route) is an empty feed with a
// message instead of an error.
const changesAdapter = {
  async page(params) {
    try {
      // Newest first: before=0 is the newest page, then before=<next> for older ones.
      if (!params.has("before")) params.set("before", "0");
      const body = await api("/api/changes?" + params);
      const items = (body.items || []).map(this.normalize);
      return { available: true, items, next: body.more && body.next ? String(body.next) : null };
    } catch (err) {
      if (err instanceof HttpError && err.status === 404) return { available: false, items: [], next: null };
      throw err;
    }
  },
  normalize(e) {
    const before = e.before || {}, after = e.after || {};
    return {
      at: typeof e.at === "number" ? e.at * 1000 : e.at,  // epoch seconds
      source: e.source, key: e.key, variant: e.variant || null, url: e.url,
      kind: e.kind, direction: e.direction || null, percent: e.percent ?? null, job: e.job_id,
      before, after,
    };
  },
};
const KINDS = ["new", "price_changed", "out_of_stock", "back_in_stock", "delisted", "relisted"];
// Verification before alerting: candidate changes by how their re-check ended (null when the
// API has no such route, or nothing was ever held).
async function verificationCounts(source) {
  const q = new URLSearchParams();
  if (source) q.set("source", source);
  try {
    const counts = await api("/api/changes/verification?" + q);
    return Object.values(counts).some((n) => n) ? counts : null;
  } catch (err) {
    if (err instanceof HttpError) return null;
    throw err;
  }
}

async function changesPage(gen) {
  const p = routeParams();
  const q = new URLSearchParams();
  for (const k of ["source", "kind"]) if (p.get(k)) q.set(k, p.get(k));
  if (p.get("cursor")) q.set("before", p.get("cursor"));
  q.set("limit", "50");
  const feed = await changesAdapter.page(q);
  const counts = await verificationCounts(p.get("source"));
  if (gen !== generation) return;
  const form = h("form", { class: "filters", onsubmit: (ev) => {
    ev.preventDefault();
    setRouteParams("/changes", [...new FormData(form).entries()]);
  } },
  h("label", {}, "Source", h("input", { type: "search", name: "source", value: p.get("source") || "" })),
  h("label", {}, "Kind", h("select", { name: "kind" }, h("option", { value: "" }, "any"),
    KINDS.map((k) => h("option", { value: k, selected: p.get("kind") === k }, k.replaceAll("_", " "))))),
  h("button", { type: "submit" }, "Apply"));
  const rows = table("changes-feed", ["when", "product", "variant", "change", ["before", "num"], ["after", "num"], "job"],
    feed.items, (e, tr) => {
      const what = e.kind ? e.kind.replaceAll("_", " ") + (e.percent !== null ? " " + e.percent + "%" : "") : "";
      const show = (s) => [money(s.sale_price || s.price, s.currency), s.availability ? "(" + s.availability.replaceAll("_", " ") + ")" : ""].join(" ");
      tr.append(td(when(e.at)), h("td", {}, e.source && e.key ? link(productHref({ source: e.source, key: e.key }), e.key) : e.key || ""),
        td(e.variant || ""), td(what, e.kind === "out_of_stock" || e.kind === "delisted" ? "bad" : ""),
        td(show(e.before), "num"), td(show(e.after), "num"), h("td", {}, e.job ? link("#/job/" + e.job, "#" + e.job) : ""));
    }, feed.available ? "no change yet" : "no change events");
  rows.dataset.main = "";
  const notice = feed.available ? null : h("p", { class: "notice", id: "changes-unavailable", role: "status" },
    "This API does not serve product change events yet (/api/changes answers 404). ",
    "The feed fills in once the change events of issue 18 are deployed; until then, ",
    "each product's page shows its price and stock history.");
  const verified = counts ? h("p", { class: "muted", id: "changes-verification", role: "status" },
    "Verified before alerting: ",
    ["confirmed", "cancelled", "unknown", "pending"].map((k) => counts[k] + " " + k).join(" · "),
    " (cancelled: a re-check contradicted the change, no alert; unknown: the re-check said nothing)") : null;
  setPage("changes", h("section", {}, h("h2", {}, "Changes ", h("span", { class: "muted" }, "live")), form, notice, verified, rows,
    h("div", { class: "pager" }, h("button", { type: "button", disabled: !feed.next, onclick: () => {
      const np = new URLSearchParams(p); np.set("cursor", feed.next); setRouteParams("/changes", [...np.entries()]);
    } }, "Older →"))));
  // Live: the first page re-reads itself while it is shown (only while the API has a feed).
  current.live = feed.available && !p.get("cursor") ? () => changesPage(generation) : null;
  ready("changes");
}

// -- Jobs -------------------------------------------------------------------------------------------
function sparkline(values) {
  const w = 120, hgt = 22;
  const c = h("canvas", { width: w, height: hgt, class: "spark", role: "img",
    "aria-label": "pages per minute: " + values.join(", ") });
  c.dataset.points = String(values.length);
  const ctx = c.getContext("2d");
  const max = Math.max(1, ...values);
  ctx.strokeStyle = css("--series-1");
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  values.forEach((v, i) => {
    const x = values.length === 1 ? w / 2 : (i / (values.length - 1)) * (w - 2) + 1;
    const y = hgt - 1 - (v / max) * (hgt - 3);
    if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
  });
  if (values.length === 1) ctx.arc(w / 2, hgt - 1 - (values[0] / max) * (hgt - 3), 1.5, 0, 7);
  ctx.stroke();
  return c;
}

async function jobsPage(gen) {
  const p = routeParams();
  const q = new URLSearchParams();
  for (const k of ["status", "source", "cursor"]) if (p.get(k)) q.set(k, p.get(k));
  q.set("limit", "50");
  const page = await api("/api/jobs/history?" + q);
  if (gen !== generation) return;
  const rows = table("job-history", ["job", "source", "kind", "status", "started", ["duration", "num"], ["pages", "num"],
    ["products", "num"], ["failed", "num"], "pages / min"], page.items, (j, tr) => {
    tr.append(h("td", {}, link("#/job/" + j.id, "#" + j.id)), td(j.source), td(j.kind),
      td(j.status, j.status === "running" ? "warn" : j.status === "cancelled" ? "muted" : "ok"),
      td(when(j.created_at)), td(j.status === "running" ? "running" : duration(j.duration_s), "num"),
      td(j.pages.toLocaleString(), "num"), td(j.products.toLocaleString(), "num"),
      td((100 * j.failure_rate).toFixed(1) + " %", j.failure_rate > 0.05 ? "bad" : ""),
      h("td", {}, sparkline(j.pages_per_minute)));
  }, "no job yet");
  rows.dataset.main = "";
  const form = h("form", { class: "filters", onsubmit: (ev) => {
    ev.preventDefault(); setRouteParams("/jobs", [...new FormData(form).entries()]);
  } },
  h("label", {}, "Source", h("input", { type: "search", name: "source", value: p.get("source") || "" })),
  h("label", {}, "Status", h("select", { name: "status" }, h("option", { value: "" }, "any"),
    ["running", "completed", "cancelled"].map((s) => h("option", { value: s, selected: p.get("status") === s }, s)))),
  h("button", { type: "submit" }, "Apply"));
  setPage("jobs", h("section", {}, h("h2", {}, "Jobs"), form, rows, h("div", { class: "pager" },
    h("button", { type: "button", onclick: () => history.back(), disabled: !p.get("cursor") }, "← Newer"),
    h("button", { type: "button", disabled: !page.next_cursor, onclick: () => {
      const np = new URLSearchParams(p); np.set("cursor", page.next_cursor); setRouteParams("/jobs", [...np.entries()]);
    } }, "Older →"))));
  const running = page.items.some((j) => j.status === "running");
  current.live = running && !p.get("cursor") ? () => jobsPage(generation) : null;
  ready("jobs");
}

async function jobPage(gen, id) {
  const prog = await api("/api/jobs/" + encodeURIComponent(id) + "/progress");
  await loadUplot();
  if (gen !== generation) return;
  const job = prog.job, c = job.counters;
  const outcomes = Object.entries(c).filter(([k]) => k.startsWith("outcome_")).map(([k, v]) => [k.slice(8), v]);
  const names = [...new Set(prog.series.flatMap((b) => Object.keys(b.outcomes)))].sort();
  const xs = prog.series.map((b) => Date.parse(b.at) / 1000);
  const data = [xs, ...names.map((n) => prog.series.map((b) => b.outcomes[n] || 0))];
  const box = h("div", { class: "chart", id: "job-chart", role: "img", "aria-label": "attempts by outcome over time" });
  const cancel = job.status === "running" ? h("button", { type: "button", onclick: async () => {
    try { await post("/api/jobs/" + job.id + "/cancel"); route(); } catch (err) { failed(err); }
  } }, "Cancel job") : null;
  setPage("job", h("section", {},
    h("h2", {}, "Job #" + job.id + " · " + job.source + " · " + job.kind + " · " + job.status, " ", cancel),
    h("dl", { class: "facts" }, [["started", when(job.created_at)], ["finished", when(job.finished_at)],
      ["pages", (c.total || 0) - (c.open || 0) + " / " + (c.total || 0)], ["products", c.products || 0],
      ["failed", c.failed || 0], ["rate / min", job.rate_per_min]]
      .map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v)))),
    box),
  h("section", {}, h("h2", {}, "Outcomes"), table("outcomes", ["outcome", ["pages", "num"]], outcomes,
    ([k, v], tr) => tr.append(td(k), td(v, "num")), "no attempt yet")),
  h("section", {}, h("h2", {}, "Top errors"), table("top-errors", ["outcome", "status", "error", ["count", "num"], "example", "last"],
    prog.top_errors, (e, tr) => tr.append(td(e.outcome, "bad"), td(e.status), td(e.error, "wrap"), td(e.count, "num"),
      td(e.example_url, "wrap"), td(ago(e.last_at))), "no error")));
  if (xs.length) {
    chart(box, "attempts per " + prog.bucket_s + " s by outcome",
      [{}, ...names.map((n, i) => ({ label: n, stroke: css(SERIES[i % SERIES.length]), width: 2, points: { show: true, size: 5 } }))],
      data);
  } else {
    box.append(h("p", { class: "muted" }, "no attempt yet"));
    box.dataset.points = "0";
  }
  current.live = job.status === "running" ? () => jobPage(generation, id) : null;
  ready("job");
}

// -- Sources and schedules ------------------------------------------------------------------------
async function sourcesPage(gen) {
  const [sources, schedules] = await Promise.all([api("/api/sources"), api("/api/schedules")]);
  if (gen !== generation) return;
  const act = (fn) => async () => { try { await fn(); route(); } catch (err) { failed(err); } };
  const srcRows = table("sources", ["source", "seeds", "running job", ""], sources, (s, tr) => {
    const seeds = (s.definition.seeds || []).length;
    tr.append(td(s.name), td(seeds), h("td", {}, s.running_job ? link("#/job/" + s.running_job, "#" + s.running_job) : "—"),
      h("td", {}, h("button", { type: "button", onclick: act(() => post("/api/jobs", { source: s.name })) }, "Crawl now"),
        " ", link("#/products?source=" + encodeURIComponent(s.name), "products"),
        " ", link("#/jobs?source=" + encodeURIComponent(s.name), "jobs")));
  }, "no source");
  srcRows.dataset.main = "";
  const schedRows = table("schedules", ["#", "source", "spec", "kind", "enabled", "next run", "last job", "last error", ""],
    schedules, (s, tr) => {
      tr.append(td(s.id), td(s.source), td(s.spec), td(s.kind), td(s.enabled ? "yes" : "no", s.enabled ? "ok" : "muted"),
        td(s.enabled ? when(s.next_run_at) : ""), h("td", {}, s.last_job_id ? link("#/job/" + s.last_job_id, "#" + s.last_job_id) : ""),
        td(s.last_error || "", "wrap bad"),
        h("td", {},
          h("button", { type: "button", "data-action": s.enabled ? "disable" : "enable",
            onclick: act(() => post("/api/schedules/" + s.id + "/" + (s.enabled ? "disable" : "enable"))) },
            s.enabled ? "Disable" : "Enable"), " ",
          h("button", { type: "button", "data-action": "run", onclick: act(() => post("/api/schedules/" + s.id + "/run")) }, "Run now")));
    }, "no schedule");
  setPage("sources", h("section", {}, h("h2", {}, "Sources"), srcRows),
    h("section", {}, h("h2", {}, "Schedules"), schedRows,
      h("p", { class: "muted" }, "Add one with trawl schedule add SOURCE SPEC, or POST /api/schedules.")));
  ready("sources");
}

// -- Match ------------------------------------------------------------------------------------------
async function matchPage(gen) {
  const p = routeParams();
  const gtin = p.get("gtin") || "", mpn = p.get("mpn") || "";
  const form = h("form", { class: "filters", role: "search", onsubmit: (ev) => {
    ev.preventDefault(); setRouteParams("/match", [...new FormData(form).entries()]);
  } },
  h("label", {}, "GTIN", h("input", { type: "search", name: "gtin", value: gtin, inputmode: "numeric" })),
  h("label", {}, "MPN", h("input", { name: "mpn", value: mpn })),
  h("button", { type: "submit" }, "Compare"));
  const parts = [h("h2", {}, "Match across sources"), form];
  if (gtin || mpn) {
    const q = new URLSearchParams();
    if (gtin) q.set("gtin", gtin);
    if (mpn) q.set("mpn", mpn);
    const m = await api("/api/match?" + q);
    if (gen !== generation) return;
    const cheapest = m.products.length ? m.products[0] : null;
    parts.push(h("div", { class: "side", id: "match-side" }, m.products.length ? m.products.map((pr) =>
      h("div", { class: "card" + (pr === cheapest && m.products.length > 1 ? " cheapest" : "") },
        h("div", { class: "muted" }, pr.source),
        h("div", {}, link(productHref(pr), pr.name || pr.key)),
        h("div", { class: "price" }, money(pr.sale_price || pr.price, pr.currency)),
        pr.sale_price ? h("div", { class: "muted" }, "was " + money(pr.price, pr.currency)) : null,
        h("div", { class: stockClass(pr.availability) }, (pr.availability || "").replaceAll("_", " ")),
        pr === cheapest && m.products.length > 1 ? h("div", { class: "ok" }, "cheapest") : null))
      : h("p", { class: "muted" }, "no product has this code")));
  }
  const groups = await api("/api/match/groups?limit=100");
  if (gen !== generation) return;
  const rows = table("match-groups", ["gtin", "name", ["sources", "num"], ["products", "num"], ["lowest", "num"], ["highest", "num"]],
    groups.items, (g, tr) => tr.append(h("td", {}, link("#/match?gtin=" + encodeURIComponent(g.gtin), g.gtin)),
      td(g.name, "wrap"), td(g.sources, "num"), td(g.products, "num"), td(g.lowest, "num"), td(g.highest, "num")),
    "no GTIN is shared by two sources yet");
  rows.dataset.main = "";
  parts.push(h("h2", {}, "Shared GTINs"), rows);
  setPage("match", h("section", {}, parts));
  ready("match");
}

// -- router -----------------------------------------------------------------------------------------
const ROUTES = [
  [/^\/products$/, productsPage, "products"],
  [/^\/product\/([^/]+)\/([^/]+)$/, productPage, "products"],
  [/^\/changes$/, changesPage, "changes"],
  [/^\/jobs$/, jobsPage, "jobs"],
  [/^\/job\/(\d+)$/, jobPage, "jobs"],
  [/^\/sources$/, sourcesPage, "sources"],
  [/^\/match$/, matchPage, "match"],
];

async function route() {
  const gen = ++generation;
  current = { name: "", live: null };
  delete document.body.dataset.ready;
  const path = (location.hash.slice(1) || "/").split("?")[0];
  let nav = "overview";
  for (const [re, page, section] of ROUTES) {
    const m = path.match(re);
    if (!m) continue;
    nav = section;
    current.name = section;
    document.querySelectorAll("header nav a").forEach((a) =>
      a.dataset.nav === nav ? a.setAttribute("aria-current", "page") : a.removeAttribute("aria-current"));
    try {
      await page(gen, ...m.slice(1).map(decodeURIComponent));
      if (gen === generation) loggedIn();
    } catch (err) { if (gen === generation) failed(err); }
    return;
  }
  document.querySelectorAll("header nav a").forEach((a) =>
    a.dataset.nav === nav ? a.setAttribute("aria-current", "page") : a.removeAttribute("aria-current"));
  view.hidden = true;
  document.body.dataset.view = "overview";
  current.name = "overview";
  current.live = refresh;
  await refresh();
}

async function tick() {
  if (!current.live || document.hidden || !$("#login").hidden) return;
  // A live page redraws itself whole: not while someone is typing into its form.
  if (view.contains(document.activeElement) && document.activeElement.matches("input, select")) return;
  const kept = focusedItem();
  try { await current.live(); refocus(kept); } catch (err) { failed(err); }
}

window.addEventListener("hashchange", () => { route(); $("#content").focus({ preventScroll: true }); });
$("#login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  localStorage.setItem(TOKEN_KEY, $("#token").value.trim());
  route();
});
$("#logout").addEventListener("click", () => {
  localStorage.removeItem(TOKEN_KEY);
  route();
});

route();
setInterval(tick, INTERVAL);
