// landing.js — the landing view: every stored session and live lane, most recent
// activity first, a page at a time (GET /v1/overview). Each row is a link to
// #/session/NAME or #/lane/NAME, so what is open is named in the URL.
"use strict";

(function () {
  const P = window.toolfoldParts;
  const el = P.el;
  const PAGE = 25;
  const state = { offset: 0, total: 0, loads: 0, sessions: [], lanes: [], error: null };
  const $ = (id) => document.getElementById(id);

  function statusChips(statuses) {
    const box = el("span", "chips");
    const order = ["running", "unsettled", "error", "interrupted", "cancelled", "ok"];
    const keys = Object.keys(statuses || {}).sort((a, b) => {
      const ia = order.indexOf(a), ib = order.indexOf(b);
      return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
    });
    for (const k of keys) {
      box.appendChild(el("span", "chip status-" + k, statuses[k].toLocaleString("en-US") + " " + k));
    }
    return box;
  }

  function lastText(last) {
    if (!last) return "";
    const what = typeof last.command === "string" && last.command ? last.command : last.tool_name || "";
    return P.displayText(what).replace(/\s+/g, " ").slice(0, 200);
  }

  function row(kind, name, item) {
    const li = el("li", "overview-row" + (item.running ? " live" : "") + (item.error ? " status-error" : ""));
    li.dataset.kind = kind;
    li.dataset.name = name;
    const a = el("a", "overview-name", name);
    a.href = "#/" + kind + "/" + encodeURIComponent(name);
    const head = el("div", "overview-head");
    head.append(a);
    if (kind === "lane") head.appendChild(el("span", "chip", "live lane"));
    if (item.running) head.appendChild(el("span", "chip status-running live-dot", item.running + " running"));
    head.appendChild(el("span", "overview-count", window.toolfoldUnits.plural(item.calls || 0, "call")));
    head.appendChild(statusChips(item.statuses));
    const last = item.last;
    const when = last ? P.parseTime(last.ended_at) || P.parseTime(last.started_at) : null;
    const age = when !== null ? when : (typeof item.activity === "number" ? item.activity * 1000 : null);
    if (age !== null) {
      const t = el("time", "overview-age", P.fmtAge(Date.now() - age));
      t.dateTime = new Date(age).toISOString();
      t.title = new Date(age).toString();
      head.appendChild(t);
    }
    li.appendChild(head);
    if (item.error) li.appendChild(el("div", "overview-last", "cannot read: " + item.error));
    else if (last) {
      const line = el("div", "overview-last");
      line.append(el("span", "badge status-" + last.status, last.status), " ");
      line.appendChild(el("code", null, lastText(last)));
      li.appendChild(line);
    }
    return li;
  }

  async function load(offset) {
    state.offset = Math.max(0, offset || 0);
    let r = null;
    let body;
    try {
      r = await fetch("/v1/overview?offset=" + state.offset + "&limit=" + PAGE);
      body = await r.json();
    } catch (e) { body = { error: String(e) }; }
    state.loads += 1;
    const list = $("overview-list");
    if (!r || !r.ok) {
      state.error = (body && body.error) || "HTTP " + (r ? r.status : "?");
      list.replaceChildren(el("li", "empty", state.error));
      return;
    }
    state.error = null;
    state.total = body.total || 0;
    state.sessions = body.sessions || [];
    state.lanes = body.lanes || [];
    const nodes = [];
    if (state.offset === 0) {
      const stored = new Set(state.sessions.map((s) => s.name));
      // A lane that is a stored session on this page shows as that session.
      for (const lane of state.lanes) if (!stored.has(lane.lane)) nodes.push(row("lane", lane.lane, lane));
    }
    for (const s of state.sessions) nodes.push(row("session", s.name, s));
    if (nodes.length === 0) {
      nodes.push(el("li", "empty", "No sessions yet. Run `toolfold run -- CMD` with this store, " +
        "or type a command below."));
    }
    list.replaceChildren(...nodes);
    const last = Math.min(state.total, state.offset + state.sessions.length);
    $("overview-page").textContent = state.total
      ? "sessions " + (state.offset + 1).toLocaleString("en-US") + "–" + last.toLocaleString("en-US") +
        " of " + state.total.toLocaleString("en-US")
      : "";
    $("overview-prev").disabled = state.offset === 0;
    $("overview-next").disabled = last >= state.total;
  }

  function init() {
    $("overview-prev").addEventListener("click", () => load(state.offset - PAGE));
    $("overview-next").addEventListener("click", () => load(state.offset + PAGE));
    $("overview-reload").addEventListener("click", () => load(state.offset));
  }

  window.toolfoldLanding = { state, load, init };
})();
