// viewer.js — the lane viewer: subscribe over SSE, fold Chord batches into a
// replica with chord.js, render running and settled tool calls.
//
// Protocol (docs/replication.md): every subscription starts with a base batch
// at id 0 and continues with consecutive ids. There is no resume: on a gap, an
// id the decoder cannot resolve, a batch that fails to apply, or a connection
// error, the replica is dropped and the viewer subscribes again from scratch.
"use strict";

(function () {
  const Chord = window.Chord;
  const params = new URLSearchParams(window.location.search);
  // The server traded ?token= for an HttpOnly cookie when it served this page
  // (docs/security.md): drop the token from the address bar and the history, so
  // it is not shared with a copied link or a screenshot. Requests send the cookie.
  if (params.has("token")) {
    params.delete("token");
    const u = new URL(window.location.href);
    u.search = params.toString();
    history.replaceState(null, "", u.toString());
  }
  // What is open is named in the URL: #/session/NAME (its stored calls and its
  // lane), #/lane/NAME, or nothing: the landing view (?lane= and ?session= work too).
  function route() {
    const m = /^#\/(session|lane)\/(.+)$/.exec(window.location.hash);
    if (!m) return null;
    let name;
    try { name = decodeURIComponent(m[2]); } catch (_e) { return null; }
    return { kind: m[1], name };
  }
  const first = route();
  const viewer = {
    lane: first ? first.name : (params.get("lane") || "default"),
    session: first && first.kind === "session" ? first.name : (params.get("session") || ""),
    landing: !first && !params.has("lane") && !params.has("session"),
    stored: null,          // {session, total, calls, loads} or {session, error}
    lastSettled: undefined, // the lane's newest settled call id (reloads the stored view)
    storedLoads: 0,
    replica: null,
    expectedId: 0,
    connected: false,
    subscriptions: 0,      // how many times we (re)subscribed
    resubscribeReasons: [],
    authError: null,       // the server refused the token: reopen the URL it printed
    batches: 0,
    source: null,
    storedNames: new Set(),
    state() { return this.replica ? this.replica.value : null; },
  };
  window.toolfoldViewer = viewer;
  const Parts = window.toolfoldParts;
  const { plural, truncationText, cellText, detailsTable } = Parts;
  viewer.full = Parts.full;
  viewer.overview = window.toolfoldLanding.state;

  const $ = (id) => document.getElementById(id);
  let renderQueued = false;
  let retryTimer = null;

  function setConn(live, text) {
    viewer.connected = live;
    const el = $("conn");
    el.textContent = text;
    el.className = "conn " + (live ? "conn-live" : "conn-connecting");
  }

  function subscribe() {
    if (retryTimer !== null) { clearTimeout(retryTimer); retryTimer = null; }
    if (viewer.source) viewer.source.close();
    viewer.replica = new Chord.Replica();
    viewer.expectedId = 0;
    viewer.subscriptions += 1;
    setConn(false, "connecting");
    const src = new EventSource("/v1/lanes/" + encodeURIComponent(viewer.lane) + "/state");
    viewer.source = src;
    src.onmessage = (ev) => onBatch(src, ev);
    src.onerror = () => {
      if (viewer.source !== src) return;
      // EventSource would retry on its own with Last-Event-ID, which the server
      // does not honour; close it and take the one resubscribe path instead.
      src.close();
      // EventSource hides the status: ask the API whether the token was refused
      // (the cookie gone, the server restarted with another token), which no
      // retry can fix, and say so instead of retrying forever.
      fetch("/v1/lanes").then(async (r) => {
        if (viewer.source !== src) return;
        if (r.status === 401 || r.status === 403) {
          const body = await r.json().catch(() => ({}));
          viewer.source = null;
          viewer.authError = body.error || "HTTP " + r.status;
          setConn(false, "refused: " + viewer.authError);
          return;
        }
        resubscribe("connection error", 1000);
      }, () => { if (viewer.source === src) resubscribe("connection error", 1000); });
    };
  }

  function resubscribe(reason, delayMs) {
    viewer.resubscribeReasons.push(reason);
    if (viewer.resubscribeReasons.length > 20) viewer.resubscribeReasons.shift();
    if (viewer.source) { viewer.source.close(); viewer.source = null; }
    setConn(false, "resubscribing (" + reason + ")");
    if (retryTimer !== null) clearTimeout(retryTimer);
    retryTimer = setTimeout(subscribe, delayMs || 0);
  }

  function onBatch(src, ev) {
    if (viewer.source !== src) return;
    const id = Number(ev.lastEventId);
    if (!Number.isInteger(id) || id !== viewer.expectedId) {
      resubscribe("gap: expected id " + viewer.expectedId + ", got " + ev.lastEventId);
      return;
    }
    let wire;
    try { wire = JSON.parse(ev.data); } catch (e) { resubscribe("bad JSON at id " + id); return; }
    if (id === 0 && !Chord.isBase(wire)) { resubscribe("first batch is not a base"); return; }
    try {
      viewer.replica.fold(wire);
    } catch (e) {
      resubscribe((e && e.name ? e.name : "error") + " at id " + id + ": " + (e && e.message));
      return;
    }
    viewer.expectedId = id + 1;
    viewer.batches += 1;
    if (!viewer.connected) setConn(true, "live");
    scheduleRender();
  }

  function scheduleRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => { renderQueued = false; render(); });
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // The text of a tool output: its leading text blocks joined (one block, or head,
  // cut marker and tail under retain="head_tail"); images follow them.
  function outputText(out) {
    const content = out && Array.isArray(out.content) ? out.content : [];
    let text = "";
    for (const b of content) {
      if (!b || b.type !== "text") break;
      if (typeof b.text === "string") text += b.text;
    }
    return text;
  }

  function spillPath(out) {
    if (!out) return null;
    if (typeof out.spill_path === "string") return out.spill_path;
    const d = out.details;
    if (d && typeof d === "object") {
      for (const k of ["full_output_path", "spill_path", "fullOutputPath"]) {
        if (typeof d[k] === "string") return d[k];
      }
    }
    return null;
  }

  // The "what" of a call: a command as typed, otherwise its arguments as
  // key=value (read's path, grep's pattern and path, ...), never raw JSON braces.
  function whatText(a) {
    if (a === null || a === undefined) return "";
    if (typeof a !== "object" || Array.isArray(a)) return cellText(a);
    if (typeof a.command === "string") return a.command;
    return Object.keys(a).filter((k) => a[k] !== null && a[k] !== undefined)
      .map((k) => k + "=" + (typeof a[k] === "string" ? a[k] : cellText(a[k]))).join("  ");
  }

  const cards = new Map();  // tool_call_id -> {root, fingerprint parts}

  const storedCards = new Map();  // the same, for the stored session's calls

  function renderTool(cards, id, tool) {
    let c = cards.get(id);
    if (!c) {
      const root = el("article", "tool");
      root.dataset.toolCallId = id;
      const head = el("div", "tool-head");
      const name = el("span", "tool-name");
      const args = el("span", "tool-args");
      const badge = el("span", "badge");
      head.append(name, args, badge);
      const meta = el("div", "tool-meta");
      const time = el("time", "tool-time");
      const stats = el("span", "tool-stats");
      meta.append(time, stats);
      const trunc = el("div", "truncation");
      const pre = el("pre", "text");
      pre.tabIndex = 0;  // scrollable from the keyboard
      const table = el("div", "details-box");
      const images = el("div", "images");
      c = { root, name, args, badge, time, stats, trunc, pre, table, images, text: null, details: null, imgs: null };
      const tools = Parts.cardTools(c);
      c.fullButton = tools.full;
      c.fullButton.addEventListener("click", () => {
        if (c.full) Parts.openFull(c.full.session, c.full.call, c.full.title);
      });
      root.append(head, meta, trunc, tools.bar, pre, table, images);
      cards.set(id, c);
    }
    const status = tool.status || "running";
    c.root.className = "tool status-" + status;
    c.name.textContent = tool.tool_name;
    const a = tool.args;
    c.args.textContent = whatText(a);
    c.badge.className = "badge status-" + status;
    c.badge.textContent = tool.label || status;
    const out = tool.output;
    const text = outputText(out);
    if (c.text !== text) {
      c.pre.textContent = Parts.displayText(text);
      c.text = text;
      c.follow = !c.paused;
    }
    c.start = typeof tool.started === "number" ? tool.started : null;
    c.end = typeof tool.ended === "number" ? tool.ended : null;
    c.running = status === "running";
    updateTime(c);
    if (c.running) ticking.add(c); else ticking.delete(c);
    c.stats.textContent = Parts.statsText(out, text);
    const tt = truncationText(out, tool.tool_name);
    const sp = spillPath(out);
    c.trunc.textContent = "";
    c.full = null;
    if (tt || sp) {
      c.trunc.append(tt ? tt : "");
      if (tool.exec_host) {
        c.trunc.append((tt ? " / " : "") + "full output on exec host ");
        c.trunc.appendChild(el("code", null, tool.exec_host));
      } else if (sp) {
        c.trunc.append(tt ? " / full output at " : "full output at ");
        c.trunc.appendChild(el("code", null, sp));
        // A stored call's spill, or a live call in a lane that is a stored session.
        const session = tool.session || (viewer.storedNames.has(viewer.lane) ? viewer.lane : null);
        if (session) c.full = { session, call: id, title: tool.tool_name + " " + whatText(tool.args) };
      }
      c.trunc.hidden = false;
    } else {
      c.trunc.hidden = true;
    }
    c.fullButton.hidden = !c.full;
    const dj = out ? JSON.stringify(out.details) : "";
    if (c.details !== dj) {
      c.details = dj;
      c.table.textContent = "";
      const t = out ? detailsTable(out.details) : null;
      if (t) c.table.appendChild(t);
    }
    const content = out && Array.isArray(out.content) ? out.content : [];
    const imgs = content.filter((b) => b && b.type === "image");
    const ij = imgs.map((b) => b.mime_type + ":" + (b.data || "").length).join(",");
    if (c.imgs !== ij) {
      c.imgs = ij;
      c.images.textContent = "";
      for (const b of imgs) {
        const img = el("img");
        img.alt = "tool image";
        img.src = "data:" + b.mime_type + ";base64," + b.data;
        c.images.appendChild(img);
      }
    }
    return c.root;
  }

  const messageCards = new Map();  // message_id -> {root, parts}

  // An assistant message as it streams: its reasoning (dim), its answer text, and
  // the tool calls it asks for with their argument text as it arrives. The calls'
  // own cards follow it (renderTool), so the answer reads with its calls under it.
  function renderMessage(id, m) {
    let c = messageCards.get(id);
    if (!c) {
      const root = el("article", "message");
      root.dataset.messageId = id;
      const head = el("div", "tool-head");
      const name = el("span", "tool-name", "assistant");
      const turn = el("span", "tool-args");
      const badge = el("span", "badge");
      head.append(name, turn, badge);
      const thinking = el("pre", "thinking");
      const answer = el("div", "answer");
      const calls = el("ul", "message-calls");
      root.append(head, thinking, answer, calls);
      c = { root, turn, badge, thinking, answer, calls, key: null };
      messageCards.set(id, c);
    }
    const status = m.status || "running";
    c.root.className = "message status-" + status;
    c.turn.textContent = m.turn_id || "";
    c.badge.className = "badge status-" + status;
    c.badge.textContent = status === "running" ? "writing" : (m.stop_reason || status);
    const out = m.output && typeof m.output === "object" ? m.output : {};
    const parts = Array.isArray(out.content) ? out.content : [];
    const join = (kind, key) => parts.filter((p) => p && p.type === kind && typeof p[key] === "string").map((p) => p[key]).join("");
    const thinking = join("thinking", "thinking");
    const answer = join("text", "text");
    const calls = parts.filter((p) => p && p.type === "tool_call");
    const key = JSON.stringify([thinking.length, answer.length, calls]);
    if (c.key !== key) {
      c.key = key;
      c.thinking.textContent = thinking;
      c.thinking.hidden = !thinking;
      c.answer.textContent = answer;
      c.calls.textContent = "";
      for (const call of calls) {
        c.calls.appendChild(el("li", null, (call.name || "?") + " " + (call.arguments || "")));
      }
      c.calls.hidden = calls.length === 0;
    }
    return c.root;
  }

  function resolve(value, path) {
    let cur = value;
    for (const seg of path) {
      if (cur === null || typeof cur !== "object" || !Object.hasOwn(cur, seg)) return null;
      cur = cur[seg];
    }
    return cur;
  }

  // A lane carries no clock: a live call's start and end are when this page saw
  // them (a call already settled when the page opened shows no duration).
  const liveTimes = new Map();
  function timed(id, tool) {
    let t = liveTimes.get(id);
    if (!t) { t = { start: tool.status === "running" ? Date.now() : null, end: null }; liveTimes.set(id, t); }
    if (tool.status !== "running" && t.start !== null && t.end === null) t.end = Date.now();
    return Object.assign({}, tool, { started: t.start, ended: t.end });
  }

  const ticking = new Set();
  function updateTime(c) {
    const text = Parts.timeText(c.start, c.end, c.running);
    if (c.time.textContent !== text) c.time.textContent = text;
    if (c.start !== null) {
      c.time.dateTime = new Date(c.start).toISOString();
      c.time.title = "started " + new Date(c.start).toString() +
        (c.end !== null ? "\nended " + new Date(c.end).toString() : "");
    }
  }
  setInterval(() => { for (const c of ticking) if (c.root.isConnected) updateTime(c); }, 1000);

  function render() {
    const v = viewer.state();
    const box = $("tools");
    if (!v || typeof v !== "object") { box.textContent = ""; return; }
    const op = v.operation;
    $("operation").textContent = op ? "operation " + op.run_id + ": " + op.status : "no operation yet";
    const order = Array.isArray(v.order) ? v.order : [];
    const tools = v.tools || {};
    const messages = v.messages || {};
    const seen = new Set();
    const seenMessages = new Set();
    const nodes = [];
    // Each assistant message, then the calls it asked for; calls no message in
    // the lane asked for (toolfold run, a command) follow in their own order.
    for (const mid of Array.isArray(v.message_order) ? v.message_order : []) {
      const m = messages[mid];
      if (!m) continue;
      seenMessages.add(mid);
      nodes.push(renderMessage(mid, m));
      const parts = m.output && Array.isArray(m.output.content) ? m.output.content : [];
      for (const p of parts) {
        if (!p || p.type !== "tool_call" || !tools[p.id] || seen.has(p.id)) continue;
        seen.add(p.id);
        const node = renderTool(cards, p.id, timed(p.id, tools[p.id]));
        node.classList.add("under-message");
        nodes.push(node);
      }
    }
    for (const id of order) {
      const tool = tools[id];
      if (!tool || seen.has(id)) continue;
      seen.add(id);
      nodes.push(renderTool(cards, id, timed(id, tool)));
    }
    for (const id of Array.from(liveTimes.keys())) if (!seen.has(id)) liveTimes.delete(id);
    for (const id of Array.from(cards.keys())) if (!seen.has(id)) cards.delete(id);
    for (const id of Array.from(messageCards.keys())) if (!seenMessages.has(id)) messageCards.delete(id);
    if (nodes.length === 0) {
      box.replaceChildren(viewer.landing ? "" : el("p", "empty", "No tool calls in lane " + viewer.lane + " yet."));
    } else {
      // Detaching a node resets its scroll position, so touch the DOM only when
      // the set or order of cards changed.
      const same = box.children.length === nodes.length && nodes.every((n, i) => box.children[i] === n);
      if (!same) box.replaceChildren(...nodes);
      // Follow the tail of texts that changed (only once attached is scrollHeight known).
      for (const c of cards.values()) {
        if (c.follow && !c.paused) c.pre.scrollTop = c.pre.scrollHeight;
        c.follow = false;
      }
    }
    // The command box's "started call-…" note lasts while that call runs.
    const mine = viewer.statusCall ? tools[viewer.statusCall] : null;
    if (mine && mine.status !== "running") {
      $("command-status").textContent = "";
      viewer.statusCall = null;
    }
    const tr = Array.isArray(v.transcript) ? v.transcript : [];
    // A call settled in the lane whose stored session is open: fetch that session
    // again, so the stored view includes it (the lane's commands are its calls).
    const lastSettled = tr.length ? tr[tr.length - 1].tool_call_id : null;
    if (lastSettled !== viewer.lastSettled) {
      const first = viewer.lastSettled === undefined;
      viewer.lastSettled = lastSettled;
      if (!first && viewer.session && viewer.session === viewer.lane) showStored(viewer.session);
    }
    $("transcript-count").textContent = plural(tr.length, "settled result");
    const ol = $("transcript");
    ol.textContent = "";
    for (const m of tr) {
      const li = el("li", m && m.is_error ? "error" : "");
      // An entry whose call is still in the lane refers to its output instead of
      // carrying a second copy of it ("output_ref": ["tools", id, "output"]).
      const body = m && Array.isArray(m.output_ref) ? resolve(v, m.output_ref) : m;
      const c = outputText(body);
      const lines = c.split("\n");
      li.textContent = (m && (m.tool_name || m.tool_call_id) || "?") + " — " + plural(lines.length, "line") + ": " + lines.slice(-1)[0].slice(0, 120);
      ol.appendChild(li);
    }
  }

  async function loadLanes() {
    const sel = $("lane-select");
    let names = [];
    try {
      const r = await fetch("/v1/lanes");
      names = (await r.json()).lanes.map((l) => l.lane);
    } catch (_e) { names = []; }
    if (!names.includes(viewer.lane)) names.unshift(viewer.lane);
    sel.textContent = "";
    for (const n of names) {
      const o = el("option", null, n);
      o.value = n;
      if (n === viewer.lane) o.selected = true;
      sel.appendChild(o);
    }
  }

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
    if (route()) return;  // the hash names what is shown
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
      const node = renderTool(storedCards, call.tool_call_id, storedTool(call));
      node.dataset.stored = "1";
      return node;
    });
    if (nodes.length === 0) box.replaceChildren(el("p", "empty", "Session " + name + " has no calls."));
    else box.replaceChildren(...nodes);
    // Bounded windows are mostly tails: show their end, as for live calls.
    for (const c of storedCards.values()) c.pre.scrollTop = c.pre.scrollHeight;
    viewer.stored = { session: name, total: body.total, calls, loads: viewer.storedLoads };
  }

  $("session-select").addEventListener("change", (ev) => { showStored(ev.target.value); });
  $("stored-reload").addEventListener("click", () => { showStored(viewer.session); });
  $("stored-close").addEventListener("click", () => { $("session-select").value = ""; showStored(""); });

  function switchLane(lane) {
    viewer.lane = lane;
    loadLanes();
    viewer.lastSettled = undefined;
    cards.clear();
    liveTimes.clear();
    subscribe();   // a lane switch is the same path as a cold start
  }

  $("lane-select").addEventListener("change", (ev) => {
    const lane = ev.target.value;
    if (route()) { window.location.hash = "#/lane/" + encodeURIComponent(lane); return; }
    const u = new URL(window.location.href);
    u.searchParams.set("lane", lane);
    history.replaceState(null, "", u.toString());
    switchLane(lane);
  });

  // Following a link of the landing view (or the back button) changes the hash.
  function applyRoute() {
    const r = route();
    viewer.landing = !r;
    $("overview").hidden = !viewer.landing;
    if (!r) {
      document.title = "toolfold";
      window.toolfoldLanding.load(0);
      scheduleRender();
      return;
    }
    document.title = "toolfold — " + r.kind + " " + r.name;
    if (r.name !== viewer.lane) switchLane(r.name);
    $("session-select").value = r.kind === "session" ? r.name : "";
    showStored(r.kind === "session" ? r.name : "");
  }
  window.addEventListener("hashchange", applyRoute);

  $("command-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const input = $("command-input");
    const command = input.value;
    const status = $("command-status");
    if (!command.trim()) { status.textContent = "type a command first"; return; }
    status.textContent = "starting…";
    try {
      const r = await fetch("/v1/lanes/" + encodeURIComponent(viewer.lane) + "/commands", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ command }),
      });
      const body = await r.json();
      if (!r.ok) { status.textContent = "error: " + body.error; return; }
      status.textContent = "started " + body.tool_call_id;
      viewer.lastToolCallId = body.tool_call_id;
      viewer.statusCall = body.tool_call_id;
      // A lane that did not exist (its GET was a 404) exists now: connect at once.
      if (!viewer.connected) subscribe();
      input.value = "";
      // A lane exists once a command started in it (a subscription to a lane that
      // does not exist yet fails and retries): subscribe now rather than at the retry.
      if (!viewer.connected) subscribe();
    } catch (e) {
      status.textContent = "error: " + e;
    }
  });

  Parts.initFull();
  window.toolfoldLanding.init();
  $("overview").hidden = !viewer.landing;
  if (viewer.landing) window.toolfoldLanding.load(0);
  else if (first) document.title = "toolfold — " + first.kind + " " + first.name;
  // The landing view keeps its live marks fresh while it is looked at.
  setInterval(() => {
    if (viewer.landing && document.visibilityState === "visible") {
      window.toolfoldLanding.load(window.toolfoldLanding.state.offset);
    }
  }, 5000);
  loadLanes();
  loadSessions();
  if (viewer.session) showStored(viewer.session);
  subscribe();
})();
