// stored.js — a stored session's calls, read from the store (GET /v1/sessions and
// /v1/sessions/NAME/calls) and drawn read-only with the same cards as live calls.
// viewer.js opens it from the session picker or a #/session/NAME route.
"use strict";

(function () {
  const Parts = window.toolfoldParts;
  const { plural } = Parts;
  const el = Parts.el;
  const $ = (id) => document.getElementById(id);
  let viewer = null;  // the viewer's state (window.toolfoldViewer), from init()
  const storedCards = new Map();  // tool_call_id -> card, for the stored session's calls

  // A command recorded by the host that ran it, else the call's own arguments.
  function storedArgs(call) {
    if (typeof call.command === "string" && call.command && !(call.args && typeof call.args === "object")) {
      return { command: call.command };
    }
    return call.args && typeof call.args === "object" ? call.args : { command: call.command || "" };
  }

  // A stored call as a lane tool entry, so renderTool draws it like a live one.
  function storedTool(call) {
    const m = call.message;
    if (m) {
      const output = { content: Array.isArray(m.content) ? m.content : [], details: m.details || {} };
      if (call.truncation) output.truncation = call.truncation;
      if (typeof call.spill_path === "string") output.spill_path = call.spill_path;
      // call.status is the settled outcome (ok, error, cancelled, interrupted):
      // the same words the live lane uses once a call ends.
      return { tool_name: call.tool_name, args: storedArgs(call),
               status: call.status, label: call.status, output, ...storedExtra(call) };
    }
    const running = call.running === true;
    return { tool_name: call.tool_name, args: storedArgs(call), ...storedExtra(call),
             status: running ? "running" : "unsettled",
             label: (running ? "running" : "unsettled") + " (pending output" +
               (call.error ? ": " + call.error : " as of its last checkpoint") + ")",
             output: call.state || null };
  }

  function storedExtra(call) {
    return { started: Parts.parseTime(call.started_at), ended: Parts.parseTime(call.ended_at),
             session: viewer.session, exec_host: call.exec_host || null };
  }

  function setSessionParam(name) {
    if (viewer.route()) return;  // the hash names what is shown
    const u = new URL(window.location.href);
    if (name) u.searchParams.set("session", name); else u.searchParams.delete("session");
    history.replaceState(null, "", u.toString());
  }

  async function loadSessions() {
    const sel = $("session-select");
    let names = [];
    try {
      const r = await fetch("/v1/sessions");
      names = (await r.json()).sessions || [];
    } catch (_e) { names = []; }
    viewer.storedNames = new Set(names);
    if (viewer.session && !names.includes(viewer.session)) names.unshift(viewer.session);
    sel.textContent = "";
    const none = el("option", null, "(none)");
    none.value = "";
    sel.appendChild(none);
    for (const n of names) {
      const o = el("option", null, n);
      o.value = n;
      if (n === viewer.session) o.selected = true;
      sel.appendChild(o);
    }
  }

  async function showStored(name) {
    viewer.session = name;
    setSessionParam(name);
    const section = $("stored");
    const box = $("stored-calls");
    const title = $("stored-title");
    if (!name) {
      storedCards.clear();
      box.textContent = "";
      section.hidden = true;
      viewer.stored = null;
      return;
    }
    section.hidden = false;
    // A reload keeps the cards on screen until the new list arrives (no flicker).
    if (!viewer.stored || viewer.stored.session !== name) {
      storedCards.clear();
      box.textContent = "";
      title.textContent = "session " + name + ": loading…";
    }
    let r = null;
    let body;
    try {
      r = await fetch("/v1/sessions/" + encodeURIComponent(name) + "/calls");
      body = await r.json();
    } catch (e) { body = { error: String(e) }; }
    if (viewer.session !== name) return;  // another session was picked meanwhile
    viewer.storedLoads += 1;
    storedCards.clear();
    box.textContent = "";
    if (!r || !r.ok) {
      title.textContent = "session " + name + ": " + (body && body.error);
      viewer.stored = { session: name, error: body && body.error };
      return;
    }
    const calls = Array.isArray(body.calls) ? body.calls : [];
    title.textContent = "session " + name + " (stored, read-only): " +
      (calls.length < body.total ? "the last " + calls.length + " of " : "") + plural(body.total, "call");
    const nodes = calls.map((call) => {
      const node = window.toolfoldCards.renderTool(storedCards, call.tool_call_id, storedTool(call));
      node.dataset.stored = "1";
      return node;
    });
    if (nodes.length === 0) box.replaceChildren(el("p", "empty", "Session " + name + " has no calls."));
    else box.replaceChildren(...nodes);
    // Bounded windows are mostly tails: show their end, as for live calls.
    for (const c of storedCards.values()) c.pre.scrollTop = c.pre.scrollHeight;
    viewer.stored = { session: name, total: body.total, calls, loads: viewer.storedLoads };
  }

  // Called by viewer.js once its state exists, before anything else here runs.
  function init() {
    viewer = window.toolfoldViewer;
    $("session-select").addEventListener("change", (ev) => { showStored(ev.target.value); });
    $("stored-reload").addEventListener("click", () => { showStored(viewer.session); });
    $("stored-close").addEventListener("click", () => { $("session-select").value = ""; showStored(""); });
  }

  window.toolfoldStored = { init, loadSessions, showStored };
})();
