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
  viewer.route = route;
  window.toolfoldViewer = viewer;
  const Parts = window.toolfoldParts;
  const { plural } = Parts;
  const el = Parts.el;
  const { outputText, whatText, renderTool, renderMessage } = window.toolfoldCards;
  const { showStored, loadSessions } = window.toolfoldStored;
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

  const cards = new Map();  // tool_call_id -> {root, fingerprint parts}
  const messageCards = new Map();  // message_id -> {root, parts}

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
      nodes.push(renderMessage(messageCards, mid, m));
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
  window.toolfoldStored.init();
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
