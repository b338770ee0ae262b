// cards.js — the card of one tool call (name, what it ran, status, time, bounded
// text, truncation and spill note, details table, images) and of one assistant
// message as it streams. viewer.js keeps the maps of cards and calls these for
// live and stored calls alike. Data is only ever set as textContent, never as HTML.
"use strict";

(function () {
  const Parts = window.toolfoldParts;
  const { truncationText, cellText, detailsTable } = Parts;
  const el = Parts.el;

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
    if (typeof a.command === "string") {
      // A background command's output (a call no model made): which command of which call.
      if (typeof a.handle === "string" && typeof a.started_by === "string") {
        return a.handle + " of " + a.started_by + ": " + a.command;
      }
      return a.command;
    }
    return Object.keys(a).filter((k) => a[k] !== null && a[k] !== undefined)
      .map((k) => k + "=" + (typeof a[k] === "string" ? a[k] : cellText(a[k]))).join("  ");
  }

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
        const viewer = window.toolfoldViewer;
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

  // An assistant message as it streams: its reasoning (dim), its answer text, and
  // the tool calls it asks for with their argument text as it arrives. The calls'
  // own cards follow it (renderTool), so the answer reads with its calls under it.
  function renderMessage(messageCards, id, m) {
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

  window.toolfoldCards = { outputText, whatText, renderTool, renderMessage };
})();
