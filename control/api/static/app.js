// trawl dashboard: plain JS, no build step. This file: the API client, table helpers, the
// login, and the overview (polls the admin API and redraws its tables). views.js: the other
// pages and the router.
"use strict";

const TOKEN_KEY = "trawl-token";
const params = new URLSearchParams(location.search);
const INTERVAL = Number(params.get("interval") || 2000);
const $ = (sel) => document.querySelector(sel);

function token() { return localStorage.getItem(TOKEN_KEY) || ""; }

async function request(path, init) {
  const headers = token() ? { Authorization: "Bearer " + token() } : {};
  const opts = Object.assign({}, init || {});
  opts.headers = Object.assign(headers, opts.headers || {});
  const resp = await fetch(path, opts);
  if (resp.status === 401) throw new AuthError();
  if (!resp.ok) {
    let detail = "";
    try { detail = (await resp.json()).detail || ""; } catch (e) { /* not a problem+json */ }
    throw new HttpError(resp.status, path + ": HTTP " + resp.status + (detail ? " — " + detail : ""));
  }
  return resp;
}

async function api(path, init) {
  const resp = await request(path, init);
  return resp.status === 204 ? null : resp.json();
}

async function post(path, body) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
}

class AuthError extends Error {}
class HttpError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  return td;
}

function linkCell(href, text) {
  const td = document.createElement("td");
  const a = document.createElement("a");
  a.href = href;
  a.textContent = String(text);
  td.append(a);
  return td;
}

// Focus a list's item (a row, a diff hunk): its link, else the item itself, which only a
// script can focus (it is no tab stop).
function focusItem(item, scroll) {
  item.parentNode.querySelectorAll(":scope > .current").forEach((r) => r.classList.remove("current"));
  item.classList.add("current");
  const target = item.querySelector("a[href]") || item;
  if (target === item) item.tabIndex = -1;
  target.focus({ preventScroll: !scroll });
  if (scroll) target.scrollIntoView({ block: "nearest" });
}

// Redraws a table's rows; a focused row keeps its place (the overview redraws every tick).
function fill(id, rows, render, emptyText) {
  const body = $("#" + id + " tbody");
  const focused = [...body.rows].findIndex((r) => r.contains(document.activeElement));
  body.replaceChildren();
  if (!rows.length) {
    const tr = document.createElement("tr");
    tr.className = "empty";
    const td = cell(emptyText || "none");
    td.colSpan = $("#" + id + " thead tr").children.length;
    tr.append(td);
    body.append(tr);
    return;
  }
  for (const row of rows) {
    const tr = document.createElement("tr");
    render(row, tr);
    body.append(tr);
  }
  if (focused >= 0) focusItem(body.rows[Math.min(focused, body.rows.length - 1)], false);
}

function ago(iso) {
  if (!iso) return "";
  const secs = (Date.now() - new Date(iso).getTime()) / 1000;
  if (secs < 0) return "in " + Math.round(-secs) + "s";
  if (secs < 90) return Math.round(secs) + "s ago";
  if (secs < 5400) return Math.round(secs / 60) + "m ago";
  return Math.round(secs / 3600) + "h ago";
}

function renderJobs(page) {
  fill("jobs", page.items, (job, tr) => {
    const c = job.counters;
    const total = c.total || 0;
    const done = total - (c.open || 0);
    const bar = document.createElement("progress");
    bar.id = "job-" + job.id;
    bar.max = Math.max(total, 1);
    bar.value = done;
    bar.dataset.done = done;
    bar.dataset.total = total;
    const td = document.createElement("td");
    td.append(bar, " " + (total ? Math.round((100 * done) / total) : 0) + "%");
    tr.append(linkCell("#/job/" + job.id, job.id), cell(job.source), cell(job.kind + (job.paused ? " (paused)" : "")),
      td, cell(done + " / " + total), cell(c.products || 0),
      cell(c.failed || 0, c.failed ? "bad" : ""), cell(job.rate_per_min));
  }, "no running job");
}

function renderStreams(streams) {
  const rows = [];
  for (const s of streams) {
    if (!s.consumers.length) rows.push({ s, c: null });
    for (const c of s.consumers) rows.push({ s, c });
  }
  fill("streams", rows, ({ s, c }, tr) => {
    tr.append(cell(s.key), cell(s.messages), cell(c ? c.name : "—"),
      cell(c ? c.pending : "", c && c.pending ? "warn" : ""), cell(c ? c.ack_pending : ""),
      cell(c ? c.redelivered : ""));
  });
}

function renderDomains(domains) {
  fill("domains", domains, (d, tr) => {
    tr.append(cell(d.domain), cell(d.paused ? "paused" : "active", d.paused ? "warn" : ""),
      cell(d.in_flight + " / " + d.max_in_flight), cell(d.min_delay + "–" + d.max_delay),
      cell(d.backoff.toFixed(2), d.backoff > 1 ? "warn" : ""), cell(d.pending), cell(d.waiting),
      cell(d.blocked_last_hour, d.blocked_last_hour ? "bad" : ""), cell(ago(d.next_allowed_at)));
  });
}

function renderWorkers(workers) {
  fill("workers", workers, (w, tr) => {
    const stats = Object.entries(w.stats).map(([k, v]) => k + "=" + v).join("  ");
    tr.append(cell(w.service), cell(w.instance), cell(ago(w.started)), cell(stats, "wrap"));
  }, "no live worker");
}

function renderFailures(failures) {
  fill("failures", failures, (f, tr) => {
    tr.append(cell(ago(f.recorded_at)), f.job_id ? linkCell("#/job/" + f.job_id, f.job_id) : cell(""),
      cell(f.outcome, "bad"), cell(f.status),
      cell(f.url, "wrap"), cell(f.error, "wrap"));
  });
}

function renderDlq(page) {
  $("#dlq-total").textContent = "(" + page.total + ")";
  fill("dlq", page.items, (l, tr) => {
    tr.append(cell(l.seq), cell(l.stream), cell(l.reason, "wrap"), cell(l.num_delivered),
      cell(ago(new Date(l.at * 1000).toISOString())));
  }, "empty");
}

function needLogin() {
  $("#board").hidden = true;
  $("#view").hidden = true;
  $("#login").hidden = false;
  $("#status").textContent = token() ? "token rejected" : "token needed";
}

function loggedIn() {
  $("#login").hidden = true;
  $("#logout").hidden = !token();
}

// Each table is drawn as soon as its answer comes, so the quick ones do not wait for the
// slowest: the workers' scatter-gather listens 400 ms for replies (control/api/workers.py).
// The page is ready (data-ready, the mark) once every table is.
async function refresh() {
  const overview = () => typeof current === "undefined" || current.name === "overview";
  let shown = false;
  const draw = async (path, render) => {
    const body = await api(path);
    // Answers that come back after the reader moved to another page (views.js's `current`)
    // must not pull the overview back over it, nor mark it ready.
    if (!overview()) return;
    render(body);
    if (!shown) {
      shown = true;
      loggedIn();
      $("#board").hidden = false;
      performance.mark("rows:overview");
    }
  };
  try {
    await Promise.all([
      draw("/api/jobs?status=running&limit=20", renderJobs),
      draw("/api/streams", renderStreams),
      draw("/api/domains?limit=50", renderDomains),
      draw("/api/workers", renderWorkers),
      draw("/api/jobs/failures?limit=10", renderFailures),
      draw("/api/dlq?limit=10", renderDlq),
    ]);
    if (!overview()) return;
    $("#status").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.refreshed = String(Date.now());
    document.body.dataset.ready = "overview";
    performance.mark("ready:overview");
  } catch (err) {
    if (err instanceof AuthError) needLogin();
    else $("#status").textContent = "error: " + err.message;
  }
}
