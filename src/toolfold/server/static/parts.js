// parts.js — pieces of the viewer that stand alone: time and size text, the
// reading tools of a call card (follow, wrap, copy, find) and the full-output
// panel that pages through a call's spill file (GET .../calls/{id}/output).
// Data is only ever set as textContent, never as HTML.
"use strict";

(function () {
  const P = {};

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  P.el = el;

  // One byte formatter for the whole project (IEC units, see toolfold/_units.py):
  // units.js defines it, and a browser test checks it against the Python one.
  function fmtBytes(n) {
    if (typeof n !== "number") return "?";
    return window.toolfoldUnits.formatBytes(n);
  }

  function plural(n, word) {
    return typeof n === "number" ? window.toolfoldUnits.plural(n, word) : "? " + word + "s";
  }

  function group(n) {
    return typeof n === "number" ? n.toLocaleString("en-US") : "?";
  }

  // "showing last N of M lines / full output at PATH", from the truncation
  // totals the producer keeps inside the state (no caps travel on tool_start).
  // The state does not say which end was kept; a "retain" field wins if a
  // producer adds one, else head for the head-retaining built-ins, tail otherwise.
  function truncationText(out, toolName) {
    const tr = out && out.truncation;
    if (!tr || !tr.truncated) return null;
    if (typeof tr.cut_lines === "number") {
      // head_tail: the start and the end are shown, the middle was cut.
      return "showing the start and the end: " + plural(tr.cut_lines, "line") + " (" +
        fmtBytes(tr.cut_bytes) + ") of " + plural(tr.total_lines, "line") + " cut from line " +
        group(tr.cut_line) + " (" + fmtBytes(tr.output_bytes) + " of " + fmtBytes(tr.total_bytes) + " shown)";
    }
    const retain = out.retain || tr.retain || (toolName === "read" || toolName === "grep" ? "head" : "tail");
    const which = retain === "head" ? "first" : "last";
    let s = "showing " + which + " " + group(tr.output_lines) + " of " + plural(tr.total_lines, "line") + " (" +
      fmtBytes(tr.output_bytes) + " of " + fmtBytes(tr.total_bytes) + ", limit " +
      (tr.truncated_by === "bytes" ? fmtBytes(tr.max_bytes) : plural(tr.max_lines, "line")) + ")";
    return s;
  }

  function cellText(v) {
    if (v === null || v === undefined) return "";
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }

  function detailsTable(details) {
    if (!details || typeof details !== "object" || Array.isArray(details)) return null;
    const keys = Object.keys(details);
    if (keys.length === 0) return null;
    const t = el("table", "details");
    for (const k of keys) {
      const tr = el("tr");
      tr.appendChild(el("th", null, k));
      const v = details[k];
      const td = el("td");
      if (Array.isArray(v) && v.length && v.every((x) => x && typeof x === "object" && !Array.isArray(x))) {
        // A list of records (e.g. pytest failures) reads best as a nested table.
        const inner = el("table", "details");
        for (const row of v) {
          const r = el("tr");
          for (const rk of Object.keys(row)) r.appendChild(el("td", null, rk + ": " + cellText(row[rk])));
          inner.appendChild(r);
        }
        td.appendChild(inner);
      } else {
        td.textContent = cellText(v);
      }
      tr.appendChild(td);
      t.appendChild(tr);
    }
    return t;
  }

  P.plural = plural;
  P.truncationText = truncationText;
  P.cellText = cellText;
  P.detailsTable = detailsTable;

  // Terminal escape sequences (colours, cursor moves, titles) are dropped from
  // what is shown: they are noise in a page and could otherwise smuggle layout.
  // eslint-disable-next-line no-control-regex
  const ESCAPES = /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])/g;
  P.displayText = (s) => (typeof s === "string" ? s.replace(ESCAPES, "") : "");

  P.fmtDuration = function (ms) {
    if (typeof ms !== "number" || !isFinite(ms) || ms < 0) return "?";
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s";
    const m = Math.floor(ms / 60000);
    if (m < 60) return m + " min " + Math.floor((ms % 60000) / 1000) + " s";
    return Math.floor(m / 60) + " h " + (m % 60) + " min";
  };

  P.fmtAge = function (ms) {
    if (typeof ms !== "number" || !isFinite(ms)) return "";
    return P.fmtDuration(Math.max(0, ms)).replace(/ \d+ (s|min)$/, "") + " ago";
  };

  P.parseTime = function (iso) {
    if (typeof iso !== "string") return null;
    const t = Date.parse(iso);
    return isNaN(t) ? null : t;
  };

  // The time line of a card: "started 12:01:05 · 1.2 s", or "running 12 s"
  // (ticking: viewer.js refreshes running cards every second).
  P.timeText = function (start, end, running) {
    if (start === null || start === undefined) return running ? "running" : "";
    const clock = new Date(start).toLocaleTimeString();
    if (running) return "started " + clock + " · running " + P.fmtDuration(Date.now() - start);
    if (end === null || end === undefined) return "started " + clock;
    return "started " + clock + " · took " + P.fmtDuration(end - start);
  };

  // "exit 3 · seen 2,500 lines (610 KiB) · kept 2,000 lines (488 KiB)".
  P.statsText = function (out, text) {
    const U = window.toolfoldUnits;
    const parts = [];
    const d = out && out.details;
    if (d && typeof d === "object" && typeof d.exit_code === "number") parts.push("exit " + d.exit_code);
    const tr = out && out.truncation;
    if (tr && typeof tr.total_lines === "number") {
      parts.push("seen " + U.plural(tr.total_lines, "line") + " (" + U.formatBytes(tr.total_bytes || 0) + ")");
      if (typeof tr.output_lines === "number") {
        parts.push("kept " + U.plural(tr.output_lines, "line") + " (" + U.formatBytes(tr.output_bytes || 0) + ")" +
          (tr.truncated ? " — cut" : ""));
      }
    } else if (text) {
      const n = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
      parts.push(U.plural(n, "line") + " (" + U.formatBytes(new TextEncoder().encode(text).length) + ")");
    }
    return parts.join(" · ");
  };

  // Select the next match of `query` in a <pre>'s text after character `from`;
  // returns the index found (-1: none). The selection scrolls into view.
  function findIn(pre, query, from) {
    const text = pre.textContent;
    if (!query) return -1;
    let i = text.toLowerCase().indexOf(query.toLowerCase(), from);
    if (i < 0 && from > 0) i = text.toLowerCase().indexOf(query.toLowerCase());
    if (i < 0) return -1;
    const node = pre.firstChild;
    if (!node || node.nodeType !== Node.TEXT_NODE) return i;
    const range = document.createRange();
    range.setStart(node, i);
    range.setEnd(node, i + query.length);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    const r = range.getBoundingClientRect();
    const box = pre.getBoundingClientRect();
    pre.scrollTop += r.top - box.top - box.height / 3;
    return i;
  }
  P.findIn = findIn;

  function countIn(text, query) {
    if (!query) return 0;
    const t = text.toLowerCase();
    const q = query.toLowerCase();
    let n = 0;
    for (let i = t.indexOf(q); i >= 0 && n < 10000; i = t.indexOf(q, i + q.length)) n += 1;
    return n;
  }

  function button(text, title) {
    const b = el("button", "tool-button", text);
    b.type = "button";
    if (title) b.title = title;
    return b;
  }

  // The reading tools under a card's head. `c` is the card ({pre, follow...});
  // c.paused stops following the tail; wrap toggles the pre's class.
  P.cardTools = function (c) {
    const bar = el("div", "tool-bar");
    const follow = button("pause", "stop following the end of the output");
    follow.addEventListener("click", () => {
      c.paused = !c.paused;
      follow.textContent = c.paused ? "follow" : "pause";
      follow.setAttribute("aria-pressed", String(!!c.paused));
      if (!c.paused) c.pre.scrollTop = c.pre.scrollHeight;
    });
    const wrap = button("no wrap", "wrap long lines on or off");
    wrap.addEventListener("click", () => {
      c.pre.classList.toggle("nowrap");
      wrap.textContent = c.pre.classList.contains("nowrap") ? "wrap" : "no wrap";
    });
    const copy = button("copy", "copy the output shown");
    copy.addEventListener("click", async () => {
      try { await navigator.clipboard.writeText(c.pre.textContent); copy.textContent = "copied"; }
      catch (_e) { copy.textContent = "copy failed"; }
      setTimeout(() => { copy.textContent = "copy"; }, 1500);
    });
    const find = el("input", "tool-find");
    find.type = "search";
    find.placeholder = "find";
    find.setAttribute("aria-label", "find in this output");
    const count = el("span", "find-count");
    let at = -1;
    find.addEventListener("input", () => {
      at = -1;
      count.textContent = find.value ? String(countIn(c.pre.textContent, find.value)) + " found" : "";
    });
    find.addEventListener("keydown", (ev) => {
      if (ev.key !== "Enter") return;
      ev.preventDefault();
      c.paused = true;
      follow.textContent = "follow";
      at = findIn(c.pre, find.value, at + 1);
    });
    const full = button("show full output", "page through the whole output, find, download");
    full.hidden = true;
    bar.append(follow, wrap, copy, find, count, full);
    return { bar, full, follow };
  };

  // ---- the full-output panel ------------------------------------------------
  const PAGE_LINES = 500;
  const full = { session: null, call: null, line: 1, loads: 0, lines: 0, first: null,
                 error: null, eof: false, size: null, totalLines: null, cut: false,
                 findQuery: null, findLine: null };
  P.full = full;
  let seq = 0;

  const $ = (id) => document.getElementById(id);

  function outputUrl(query) {
    return "/v1/sessions/" + encodeURIComponent(full.session) + "/calls/" +
      encodeURIComponent(full.call) + "/output" + (query ? "?" + query : "");
  }

  async function loadPage(line) {
    const mine = ++seq;
    full.line = Math.max(1, Math.floor(line) || 1);
    $("full-line").value = String(full.line);
    $("full-status").textContent = "loading line " + full.line.toLocaleString("en-US") + "…";
    let r = null;
    let body;
    try {
      r = await fetch(outputUrl("line=" + full.line + "&lines=" + PAGE_LINES));
      body = await r.json();
    } catch (e) { body = { error: String(e) }; }
    if (mine !== seq) return;
    full.loads += 1;
    if (!r || !r.ok) {
      full.error = (body && body.error) || "HTTP " + (r ? r.status : "?");
      $("full-status").textContent = full.error;
      $("full-text").textContent = "";
      $("full-gutter").textContent = "";
      full.lines = 0;
      return;
    }
    full.error = null;
    const lines = Array.isArray(body.lines) ? body.lines : [];
    full.lines = lines.length;
    full.first = lines.length ? lines[0] : null;
    full.eof = !!body.eof;
    full.size = body.size;
    full.cut = !!body.cut;
    if (typeof body.total_lines === "number") full.totalLines = body.total_lines;
    // One page at a time: the panel holds two text nodes whatever the file's size.
    $("full-text").textContent = lines.map(P.displayText).join("\n");
    const nums = [];
    for (let i = 0; i < lines.length; i++) nums.push(String(full.line + i));
    $("full-gutter").textContent = nums.join("\n");
    $("full-body").scrollTop = 0;
    const U = window.toolfoldUnits;
    $("full-status").textContent = lines.length
      ? "lines " + full.line.toLocaleString("en-US") + "–" + (full.line + lines.length - 1).toLocaleString("en-US") +
        (full.totalLines !== null ? " of " + full.totalLines.toLocaleString("en-US") : "") +
        " · byte " + body.offset.toLocaleString("en-US") + " of " + U.formatBytes(body.size) +
        (body.cut ? " · a line longer than 1 MiB is cut" : "")
      : "no line " + full.line.toLocaleString("en-US") + " (the output has " +
        (full.totalLines !== null ? U.plural(full.totalLines, "line") : "fewer lines") + ")";
    $("full-prev").disabled = full.line <= 1;
    $("full-next").disabled = full.eof;
    runFind(false);
  }
  P.loadPage = loadPage;

  // Typing counts the matches on the page; Enter asks the server for the next line
  // holding the text in the whole file (from this page's first line, or after the
  // last match: "next") and opens the page that starts there. A scan the server
  // bounds (it answers where it stopped) goes on by itself until a match or the end.
  function runFind(next) {
    const q = $("full-find").value;
    const pre = $("full-text");
    if (!next) {
      $("full-find-count").textContent = q ? countIn(pre.textContent, q) + " on this page" : "";
      return;
    }
    if (q) findInFile(q);
  }

  async function findInFile(q) {
    const mine = ++seq;
    let from = full.findQuery === q && full.findLine !== null ? full.findLine + 1 : full.line;
    const start = from;
    full.findQuery = q;
    full.findLine = null;
    for (;;) {
      $("full-find-count").textContent = "searching from line " + from.toLocaleString("en-US") + "…";
      let r = null;
      let body;
      try {
        r = await fetch(outputUrl("find=" + encodeURIComponent(q) + "&from_line=" + from));
        body = await r.json();
      } catch (e) { body = { error: String(e) }; }
      if (mine !== seq) return;
      if (!r || !r.ok) {
        $("full-find-count").textContent = (body && body.error) || "HTTP " + (r ? r.status : "?");
        return;
      }
      if (typeof body.line === "number") {
        full.findLine = body.line;
        await loadPage(body.line);
        if (full.findLine !== body.line) return;
        findIn($("full-text"), q, 0);
        $("full-find-count").textContent = "found on line " + body.line.toLocaleString("en-US") +
          " (Enter: next)";
        return;
      }
      if (typeof body.stopped_at_line !== "number") {
        full.findLine = null;
        $("full-find-count").textContent = "not found from line " + start.toLocaleString("en-US") + " to the end";
        return;
      }
      from = body.stopped_at_line;
    }
  }

  P.openFull = function (session, call, title) {
    full.session = session;
    full.call = call;
    full.totalLines = null;
    full.error = null;
    full.findQuery = null;
    full.findLine = null;
    $("full-title").textContent = title;
    $("full-download").href = outputUrl("download=1");
    const panel = $("full");
    panel.hidden = false;
    document.body.classList.add("full-open");
    $("full-line").focus();
    loadPage(1);
  };

  function closeFull() {
    $("full").hidden = true;
    document.body.classList.remove("full-open");
    $("full-text").textContent = "";
    $("full-gutter").textContent = "";
    full.session = null;
  }
  P.closeFull = closeFull;

  P.initFull = function () {
    $("full-close").addEventListener("click", closeFull);
    $("full-go").addEventListener("click", () => loadPage(Number($("full-line").value)));
    $("full-line").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") { ev.preventDefault(); loadPage(Number($("full-line").value)); }
    });
    $("full-prev").addEventListener("click", () => loadPage(full.line - PAGE_LINES));
    $("full-next").addEventListener("click", () => loadPage(full.line + Math.max(1, full.lines)));
    $("full-wrap").addEventListener("change", (ev) => {
      $("full").classList.toggle("wrap", ev.target.checked);
    });
    $("full-find").addEventListener("input", () => runFind(false));
    $("full-find").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") { ev.preventDefault(); runFind(true); }
    });
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && !$("full").hidden) closeFull();
    });
  };

  window.toolfoldParts = P;
})();
