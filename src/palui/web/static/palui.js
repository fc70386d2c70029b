// Palui web page: the live parts, in plain JavaScript (no build step).
// - chat: send a message to POST /api/turns with stream:true and show the NDJSON events as they arrive
//   (the answer piece by piece as the model streams it, with a live status: thinking, calling TOOL, retrying);
//   chat commands go to /chat/command; turns that are running, queued or waiting are watched until they change;
// - approval buttons: POST /api/approvals/{id}/approve|deny with stream:true, the resumed turn shown in the card;
// - a server's question (elicitation): its card's buttons POST /api/elicitations/{id}/answer with stream:true;
// - small things: the class dropdown submits on change, countdowns, confirmations, the add-server form.
// Every state change sends the session's CSRF token (X-Palui-CSRF header), read from <meta name="palui-csrf">.
"use strict";

(function () {
  document.documentElement.classList.add("js");
  const meta = document.querySelector('meta[name="palui-csrf"]');
  const CSRF = meta ? meta.content : "";
  const LIVE = ["running", "queued", "awaiting_approval"];

  // Text from a model, a server or a sender: hidden characters as styled escapes, exactly as the
  // server renders them (palui.text.escape; hidden.js is generated from the same table).
  function shownInto(e, text, oneLine) {
    const T = window.PaluiText;
    const s = String(text);
    if (!T) { e.textContent = s; return e; }
    for (const [kind, seg] of T.segments(s, oneLine)) {
      if (kind === "text") { e.append(document.createTextNode(seg)); continue; }
      const span = document.createElement("span");
      span.className = kind === "escape" ? "hidden-char" : kind === "space_run" ? "space-run" : "backslash";
      span.textContent = seg;
      e.append(span);
    }
    if (T.hasHidden(s)) {
      const note = document.createElement("span");
      note.className = "hidden-note";
      note.textContent = T.NOTE;
      e.append(" ", note);
    }
    return e;
  }

  // A run of space separators at the end of streamed text is held back until it is complete: 8 or more
  // are shown as one ␠×N, which only the whole run can tell (palui.text.display.StreamShown).
  const TRAILING_SPACES = /[\u0020\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+$/;

  // The answer being streamed: one bubble per model response, re-rendered from its raw text.
  function streamInto(events, piece) {
    let bubble = events.querySelector(".bubble.answer.streaming");
    if (!bubble) {
      bubble = el("div", "bubble answer streaming");
      bubble.dataset.raw = "";
      events.append(bubble);
    }
    bubble.dataset.raw += piece;
    bubble.replaceChildren();
    shownInto(bubble, bubble.dataset.raw.replace(TRAILING_SPACES, ""), false);
    return bubble;
  }

  // The streamed text is complete (the stored "text" event): shown whole, with the whitespace-run rule.
  function endStream(events, text) {
    const bubble = events.querySelector(".bubble.answer.streaming");
    if (!bubble) return null;
    bubble.classList.remove("streaming");
    bubble.replaceChildren();
    shownInto(bubble, text !== undefined ? text : bubble.dataset.raw, false);
    delete bubble.dataset.raw;
    return bubble;
  }

  // Text streamed by an attempt that failed and is retried: kept, struck through and marked.
  function discardStream(events) {
    const bubble = events.querySelector(".bubble.answer.streaming");
    if (!bubble) return;
    bubble.classList.remove("streaming");
    bubble.classList.add("discarded");
    bubble.append(" ", el("span", "discard-mark", "discarded (retrying)"));
    delete bubble.dataset.raw;
  }

  // What the running turn does now, in its footer: thinking, writing, calling TOOL, retrying in N s.
  function liveStatus(meta, e) {
    let s = meta.querySelector(".live-status");
    if (!s) { s = el("span", "live-status"); meta.append(s); }
    if (s.dataset.timer) { clearInterval(Number(s.dataset.timer)); delete s.dataset.timer; }
    if (e.type === "step") s.textContent = "thinking · step " + e.step;
    else if (e.type === "text_delta") s.textContent = "writing";
    else if (e.type === "tool_start") { s.replaceChildren("calling "); s.append(el("code", null, e.tool)); }
    else if (e.type === "tool_call") s.textContent = "thinking";
    else if (e.type === "retry") {
      const end = Date.now() + 1000 * (Number(e.in_seconds) || 0);
      const why = String(e.reason || "");
      const tick = () => {
        s.textContent = "retrying the provider in " + Math.max(0, Math.round((end - Date.now()) / 1000)) + " s (" + why + ")";
      };
      tick();
      s.dataset.timer = String(setInterval(tick, 500));
    } else if (e.type === "approval") s.textContent = "waiting for approval " + e.approval;
    else if (e.type === "end") s.remove();
  }

  // A turn's streamed event that the events list handles itself (pieces of text); true when handled.
  function streamEvent(events, meta, e) {
    if (["step", "text_delta", "tool_start", "tool_call", "retry", "approval", "end"].includes(e.type)) liveStatus(meta, e);
    if (e.type === "text_delta") { const b = streamInto(events, e.text); b.scrollIntoView({ block: "nearest" }); return true; }
    if (e.type === "text_discarded") { discardStream(events); return true; }
    if (e.type === "text") return endStream(events, e.text) !== null;
    if (e.type === "tool_start" || e.type === "turn") return true;
    return false;
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) shownInto(e, text, false);
    return e;
  }

  function fromHTML(html) {
    const t = document.createElement("template");
    t.innerHTML = html.trim(); // server-rendered, autoescaped HTML of this origin
    return t.content.firstElementChild;
  }

  async function post(url, body) {
    return fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Palui-CSRF": CSRF },
      body: JSON.stringify(body || {}),
      credentials: "same-origin",
    });
  }

  async function errorText(resp) {
    try { const j = await resp.json(); return j.error || resp.statusText; } catch (e) { return resp.status + " " + resp.statusText; }
  }

  // Read an NDJSON response body line by line as it arrives.
  async function readNDJSON(resp, onEvent) {
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) onEvent(JSON.parse(line));
      }
    }
    if (buf.trim()) onEvent(JSON.parse(buf));
  }

  function short(v, n) {
    const s = typeof v === "string" ? v : JSON.stringify(v);
    return s.length <= n ? s : s.slice(0, n - 1) + "…";
  }

  // The nav's Approvals count: +1 when an approval event streams in, -1 when one is answered here.
  function pendingBadge(delta) {
    const badge = document.getElementById("pending-count");
    setBadge((badge ? parseInt(badge.textContent, 10) || 0 : 0) + delta);
  }

  // The nav's Approvals count as the service has it: after a command (/stop cancels the turn's approvals,
  // /approve and /deny answer one), which may change more than one.
  async function syncBadge() {
    try {
      const r = await fetch("/api/status", { credentials: "same-origin" });
      if (!r.ok) return;
      const st = await r.json();
      setBadge((st.pending_approvals || 0) + (st.pending_elicitations || 0));
    } catch (e) { /* the count stays until the next page */ }
  }

  function setBadge(n) {
    let badge = document.getElementById("pending-count");
    if (n <= 0) { if (badge) badge.remove(); return; }
    if (!badge) {
      const link = document.querySelector('header.top nav a[href="/approvals"]');
      if (!link) return;
      badge = el("span", "badge");
      badge.id = "pending-count";
      link.append(" ", badge);
    }
    badge.textContent = String(n);
  }

  // An "ask" call that has an outcome shows the outcome (mirrors templates/_event.html): [css class, words].
  function callBadge(e) {
    if (e.verdict !== "ask") return [e.verdict, e.verdict];
    if (e.denied) return ["denied", "denied"];
    if (e.cancelled) return ["cancelled", "cancelled"];
    if (e.result !== undefined && e.result !== null) return ["approved", e.is_error ? "approved · failed" : "approved · ran"];
    return ["ask", "ask"];
  }

  // One turn event as DOM (mirrors templates/_event.html; the server's version replaces it at the end).
  function renderEvent(e) {
    switch (e.type) {
      case "step": {
        const d = el("details", "step");
        d.append(el("summary", null, "step " + e.step + " · " + (e.tools_offered || []).length + " tool(s) offered"));
        const ul = el("ul", "offered");
        (e.tools_offered || []).forEach((n) => { const li = el("li"); li.append(el("code", null, n)); ul.append(li); });
        d.append(ul);
        return d;
      }
      case "tool_call": {
        const [cls, word] = callBadge(e);
        const c = el("div", "call verdict-" + cls + (e.is_error ? " is-error" : ""));
        c.dataset.tool = e.tool;
        c.dataset.verdict = e.verdict;
        const head = el("div", "call-head");
        const badge = el("span", "verdict " + cls, word);
        badge.title = "decision: " + e.verdict;
        head.append(badge, el("code", "tool", e.tool),
                    el("code", "args-inline", short(e.args || {}, 160)));
        if (e.untrusted_output) head.append(el("span", "tag untrusted", "untrusted output"));
        c.append(head, el("div", "reason", e.reason));
        if (e.result !== undefined && e.result !== null) {
          const d = el("details", "result");
          d.append(el("summary", null, e.is_error ? "error" : "result"), el("pre", null, e.result));
          c.append(d);
        }
        return c;
      }
      case "tainted":
        return el("div", "taint-event", "⚠ The conversation is now tainted by " + e.source);
      case "approval": {
        pendingBadge(+1);
        const holder = el("div", "approval-holder", "approval " + e.approval + " for " + e.tool + "…");
        fetch("/approvals/" + encodeURIComponent(e.approval) + "/card", { credentials: "same-origin" })
          .then((r) => (r.ok ? r.text() : Promise.reject(r.status)))
          .then((html) => { const card = fromHTML(html); if (card) { holder.replaceWith(card); startCountdowns(card); } })
          .catch(() => {});
        return holder;
      }
      case "elicitation": {
        // A server's question: the server-rendered card (its words escaped there too).
        if (e.status === "pending") pendingBadge(+1);
        const holder = el("div", "question-holder", "question " + e.elicitation + " from " + e.connector + "…");
        fetch("/elicitations/" + encodeURIComponent(e.elicitation) + "/card", { credentials: "same-origin" })
          .then((r) => (r.ok ? r.text() : Promise.reject(r.status)))
          .then((html) => { const card = fromHTML(html); if (card) { holder.replaceWith(card); startCountdowns(card); } })
          .catch(() => {});
        return holder;
      }
      case "elicitation_answer":
        return el("div", "note", "Question " + e.elicitation + ": " + e.action +
                  ((e.fields || []).length ? " (fields: " + e.fields.join(", ") + ")" : ""));
      case "text":
        return el("div", "bubble answer", e.text);
      case "connector_error":
        return el("div", "note warn", "Connector " + e.connector + " is not available: " + e.error);
      case "tools_left_out": {
        const names = e.tools || [];
        const d = el("details", "left-out");
        d.append(el("summary", null, names.length + " tool(s) " + (e.reason || "left out by budgets.tools")));
        const ul = el("ul", "offered");
        names.forEach((n) => { const li = el("li"); li.append(el("code", null, n)); ul.append(li); });
        d.append(ul);
        return d;
      }
      case "retry":
        return el("div", "note", "The provider failed (" + e.reason + "): retried after " + e.in_seconds + " s.");
      case "paused":
        return el("div", "note", "Paused: " + e.reason);
      case "last_step":
        return el("div", "note", "Tool use ended: " + e.reason + ". The model answers without tools.");
      case "end":
        if (e.status === "done") return null;
        return el("div", "note end-" + e.status, "Turn " + e.status.replace("_", " ") +
                  (e.budget ? ": " + e.budget : e.error ? ": " + e.error : ""));
      default:
        return null;
    }
  }

  // answerShown: the streamed events already showed the answer as text, so it is not repeated here.
  function resultLine(r, answerShown) {
    const words = {
      done: "Turn finished.", awaiting_approval: "The turn waits for another approval.",
      queued: r.queued_behind ? "The message is " + r.queued_reason + "." :
              "The turn is queued" + (r.queued_reason ? ": the " + r.queued_reason + " is reached" : "") +
              (r.start_after ? "; it can start after " + r.start_after : "") + ".",
      stopped: "The turn was stopped.", budget: "The turn ended: " + (r.budget || "a budget was reached") + ".",
      error: "The turn failed: " + (r.error || "error") + ".", running: "The turn is running.",
    };
    const p = el("div", "result-line " + r.status, words[r.status] || r.status);
    if (r.status === "done" && r.answer && !answerShown) p.append(el("div", "bubble answer", r.answer));
    return p;
  }

  // -- turns: refresh from the server, watch live ones ------------------------------------------

  async function refreshTurn(id, old) {
    const r = await fetch("/chat/turns/" + encodeURIComponent(id), { credentials: "same-origin" });
    if (!r.ok) return old;
    const fresh = fromHTML(await r.text());
    const cur = old && old.isConnected ? old : document.getElementById(id);
    if (!fresh) return cur;
    if (cur) cur.replaceWith(fresh); else { const t = document.getElementById("turns"); if (t) t.append(fresh); }
    startCountdowns(fresh);
    watch(fresh);
    updateStop();
    return fresh;
  }

  function watch(turnEl) {
    if (!turnEl || !LIVE.includes(turnEl.dataset.status) || turnEl.dataset.watching) return;
    turnEl.dataset.watching = "1";
    const id = turnEl.dataset.turn;
    const seen = turnEl.dataset.status + ":" + turnEl.dataset.events;
    const tick = async () => {
      if (!turnEl.isConnected) return;
      try {
        const r = await fetch("/api/turns/" + encodeURIComponent(id), { credentials: "same-origin" });
        if (r.ok) {
          const j = await r.json();
          if (j.status + ":" + j.events.length !== seen) { await refreshTurn(id, turnEl); return; }
        }
      } catch (e) { /* the service may be restarting: keep watching */ }
      setTimeout(tick, 1000);
    };
    setTimeout(tick, 1000);
  }

  // -- chat -----------------------------------------------------------------------------------------

  // Show Stop only while a turn of this conversation is running, waiting for approval or queued.
  function updateStop() {
    const stop = document.getElementById("stop-form");
    if (!stop) return;
    const live = Array.from(document.querySelectorAll("#turns article.turn"))
      .some((t) => LIVE.includes(t.dataset.status));
    stop.hidden = !live;
  }

  function systemNote(text, isError) {
    const turns = document.getElementById("turns");
    const n = el("div", "system-note" + (isError ? " error" : ""), text);
    if (isError) n.setAttribute("role", "alert");
    turns.append(n);
    n.scrollIntoView({ block: "end" });
  }

  // The first message of a new conversation created it: give the page its address, title and list entry.
  function setConversation(id, firstMessage) {
    const chat = document.getElementById("chat");
    chat.dataset.conversation = id;
    document.querySelectorAll('input[name="conversation"]').forEach((i) => { i.value = id; });
    if (location.pathname !== "/chat/" + id) history.replaceState(null, "", "/chat/" + id);
    const title = document.getElementById("chat-title");
    if (title) title.replaceChildren("Conversation ", el("code", null, id));
    const list = document.getElementById("conversation-list");
    if (list) {
      const empty = list.querySelector(".empty");
      if (empty) empty.remove();
      list.querySelectorAll("li.current").forEach((li) => li.classList.remove("current"));
      const li = el("li", "current");
      const a = el("a");
      a.href = "/chat/" + id;
      a.append(el("span", "title", short(firstMessage, 48)), el("span", "meta", "just now · web"));
      li.append(a);
      list.prepend(li);
    }
  }

  async function runCommand(line) {
    const chat = document.getElementById("chat");
    const r = await post("/chat/command", { line: line, conversation: chat ? chat.dataset.conversation : "" });
    if (!r.ok) { systemNote(await errorText(r), true); return; }
    const j = await r.json();
    if (j.redirect) { location.href = j.redirect; return; }
    systemNote(j.text);
    if (j.turn) { const t = document.getElementById(j.turn); if (t) await refreshTurn(j.turn, t); }
    await syncBadge();
  }

  async function sendMessage(form) {
    const box = form.querySelector("textarea");
    const text = box.value.trim();
    if (!text) return;
    const button = form.querySelector("button[type=submit]");
    box.value = "";
    if (text.startsWith("/")) { await runCommand(text); return; }
    const chat = document.getElementById("chat");
    const turns = document.getElementById("turns");
    const hello = turns.querySelector(".hello");
    if (hello) hello.remove();
    const turn = el("article", "turn streaming");
    turn.dataset.status = "running";
    const user = el("div", "msg user");
    user.append(el("div", "bubble", text));
    const agent = el("div", "msg agent");
    const events = el("div", "events");
    const meta = el("footer", "turn-meta");
    meta.append(el("span", "status-word running", "running"));
    agent.append(events, meta);
    turn.append(user, agent);
    turns.append(turn);
    updateStop();
    turn.scrollIntoView({ block: "end" });
    button.disabled = true;
    let result = null;
    try {
      if (!chat.dataset.conversation) {
        // Create the conversation first, so /stop and the address work while the first turn runs.
        const c = await post("/api/conversations", { channel: "web" });
        if (!c.ok) throw new Error(await errorText(c));
        setConversation((await c.json()).conversation, text);
      }
      const resp = await post("/api/turns", { message: text, conversation: chat.dataset.conversation || null, channel: "web", stream: true });
      if (!resp.ok) {
        events.append(el("div", "note error", await errorText(resp)));
        meta.replaceChildren(el("span", "status-word error", "error"));
        turn.dataset.status = "error";
        return;
      }
      await readNDJSON(resp, (e) => {
        if (e.type === "result") { result = e; return; }
        if (e.type === "turn") { turn.dataset.turn = e.turn; }
        if (e.type === "tainted" && !agent.querySelector(".taint-mark")) {
          agent.prepend(el("div", "taint-mark", "⚠ tainted by " + e.source));
        }
        if (streamEvent(events, meta, e)) return;
        const node = renderEvent(e);
        if (node) { events.append(node); node.scrollIntoView({ block: "nearest" }); }
      });
    } catch (err) {
      events.append(el("div", "note error", "The request failed: " + (err && err.message ? err.message : err)));
    } finally {
      button.disabled = false;
      if (!result) { turn.dataset.status = "error"; updateStop(); }
    }
    if (result) {
      turn.id = result.turn;
      turn.dataset.turn = result.turn;
      if (result.conversation && chat.dataset.conversation !== result.conversation) {
        setConversation(result.conversation, text);
      }
      if (result.status === "queued") events.append(resultLine(result));
      await refreshTurn(result.turn, turn);
    }
  }

  // -- approvals --------------------------------------------------------------------------------------

  async function answerApproval(form) {
    const card = form.closest(".approval");
    const id = card.dataset.approval;
    const verb = form.dataset.verb;
    const buttons = card.querySelector(".buttons");
    buttons.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    const live = card.querySelector(".live");
    const reasonInput = card.querySelector("input[name=reason]");
    const body = { stream: true };
    const approves = verb === "approve" || verb === "always";
    if (!approves && reasonInput && reasonInput.value.trim()) body.reason = reasonInput.value.trim();
    if (verb === "denystop") body.stop = true;
    if (verb === "always") {
      // spec §5.9: every argument pinned unless the person widened it (marked ones offer no choice)
      const widen = {};
      form.querySelectorAll("select[name^='widen.']").forEach((sel) => {
        const arg = sel.name.slice("widen.".length);
        if (sel.value === "pin") return;
        const text = form.querySelector("input[name='widen_text." + CSS.escape(arg) + "']");
        widen[arg] = sel.value === "any" ? "any" : sel.value + ":" + (text ? text.value.trim() : "");
      });
      const confirm = form.querySelector("input[name=confirm]");
      body.always = { widen: widen, confirm: !!(confirm && confirm.checked) };
    }
    const path = approves ? "approve" : "deny";
    const resp = await post("/api/approvals/" + encodeURIComponent(id) + "/" + path, body);
    if (!resp.ok) {
      live.append(el("div", "note error", await errorText(resp)));
      buttons.querySelectorAll("button").forEach((b) => { b.disabled = false; });
      return;
    }
    buttons.remove();
    card.classList.remove("status-pending");
    card.classList.add("status-" + (approves ? "approved" : "denied"));
    const state = card.querySelector(".state");
    state.className = "state " + (approves ? "approved" : "denied");
    state.textContent = verb === "always" ? "approved, and from now on the same"
      : verb === "denystop" ? "denied, tool use stopped" : approves ? "approved" : "denied";
    const left = card.querySelector(".left");
    if (left) left.remove();
    pendingBadge(-1);
    let result = null;
    let answerShown = false;
    const liveMeta = el("div", "turn-meta live-meta");
    live.append(liveMeta);
    await readNDJSON(resp, (e) => {
      if (e.type === "result") { result = e; return; }
      if (e.type === "text") answerShown = true;
      if (streamEvent(live, liveMeta, e)) return;
      const node = renderEvent(e);
      if (node) live.insertBefore(node, liveMeta);
    });
    liveMeta.remove();
    if (result) live.append(resultLine(result, answerShown));
    const turnEl = card.closest("article.turn");
    if (turnEl) await refreshTurn(turnEl.dataset.turn, turnEl);
  }

  // -- a server's question ------------------------------------------------------------------------------

  // The typed answer of a question's form (mirrors palui.text.elicitation.parse_value); empty fields are
  // left out, so the server's defaults apply.
  function questionContent(form) {
    const content = {};
    form.querySelectorAll("fieldset.field").forEach((fs) => {
      const name = fs.dataset.name, kind = fs.dataset.kind;
      if (kind === "choices") {
        const chosen = Array.from(fs.querySelectorAll("input:checked")).map((i) => i.value);
        if (chosen.length) content[name] = chosen;
        return;
      }
      if (kind === "boolean" || kind === "choice") {
        const picked = fs.querySelector("input:checked");
        if (picked) content[name] = kind === "boolean" ? picked.value === "yes" : picked.value;
        return;
      }
      const input = fs.querySelector("input");
      const v = input ? input.value.trim() : "";
      if (!v) return;
      content[name] = kind === "integer" ? parseInt(v, 10) : kind === "number" ? parseFloat(v) : input.value;
    });
    return content;
  }

  async function answerQuestion(form, submitter) {
    const card = form.closest(".question");
    const id = card.dataset.question;
    const action = submitter && submitter.value ? submitter.value : "accept";
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    const live = card.querySelector(".live");
    const body = { action: action, content: action === "accept" ? questionContent(form) : null, stream: true,
                   via: "web" };
    const resp = await post("/api/elicitations/" + encodeURIComponent(id) + "/answer", body);
    if (!resp.ok) {
      live.append(el("div", "note error", await errorText(resp)));
      buttons.forEach((b) => { b.disabled = false; });
      return;
    }
    form.remove();
    const word = { accept: "accepted", decline: "declined", cancel: "cancelled" }[action] || action;
    card.classList.remove("status-pending");
    card.classList.add("status-" + word);
    const state = card.querySelector(".state");
    state.className = "state " + word;
    state.textContent = word;
    const left = card.querySelector(".left");
    if (left) left.remove();
    pendingBadge(-1);
    let result = null;
    let answerShown = false;
    await readNDJSON(resp, (e) => {
      if (e.type === "result") { result = e; return; }
      if (e.type === "text") answerShown = true;
      const node = renderEvent(e);
      if (node) live.append(node);
    });
    if (card.dataset.era === "in_call") {
      // The call waited inside the open connection: it goes on in the turn already streaming here.
      live.append(el("div", "note", "Sent to the server; the call goes on."));
      return;
    }
    if (result) live.append(resultLine(result, answerShown));
    const turnEl = card.closest("article.turn");
    if (turnEl && turnEl.dataset.turn) await refreshTurn(turnEl.dataset.turn, turnEl);
  }

  // -- small things ------------------------------------------------------------------------------------

  function startCountdowns(root) {
    (root || document).querySelectorAll("[data-expires]").forEach((span) => {
      if (span.dataset.ticking) return;
      span.dataset.ticking = "1";
      const end = Date.parse(span.dataset.expires);
      const tick = () => {
        const s = Math.floor((end - Date.now()) / 1000);
        if (s <= 0) { span.textContent = "expired"; return; }
        span.textContent = (s < 60 ? s + " s" : s < 3600 ? Math.floor(s / 60) + " min " + (s % 60) + " s"
          : Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min") + " left";
        setTimeout(tick, 1000);
      };
      tick();
    });
  }

  // "Add an MCP server" is sent from the page, so a failed add leaves what was typed in the form (secrets
  // too, never stored anywhere by the page): the server's answer is the sheet (added: go there) or this
  // page again with the error, whose message replaces the old one here.
  async function addServer(form) {
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    try {
      const r = await fetch(form.action, { method: "POST", body: new URLSearchParams(new FormData(form)),
                                           credentials: "same-origin" });
      const back = new URL(form.querySelector('input[name="back"]').value, location.href).pathname;
      if (new URL(r.url).pathname !== back) { location.href = r.url; return; }
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      showFlash(doc.querySelector(".flash") || el("div", "flash error", r.status + " " + r.statusText));
    } catch (e) {
      showFlash(el("div", "flash error", "Palui could not be reached: " + e));
    } finally {
      if (button) button.disabled = false;
    }
  }

  // A page's message where the server puts it (above main), replacing the one shown.
  function showFlash(flash) {
    flash.setAttribute("role", "alert");
    document.querySelectorAll("body > .flash").forEach((f) => f.remove());
    document.querySelector("main").before(flash);
    flash.scrollIntoView({ block: "nearest" });
  }

  function transportFields(form) {
    const chosen = form.querySelector('input[name="transport"]:checked');
    form.querySelectorAll("[data-transport]").forEach((l) => { l.hidden = !chosen || l.dataset.transport !== chosen.value; });
  }

  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) { ev.preventDefault(); return; }
    if (form.id === "composer") { ev.preventDefault(); sendMessage(form); return; }
    if (form.classList.contains("command")) {
      ev.preventDefault();
      runCommand(form.querySelector('input[name="message"]').value);
      return;
    }
    if (form.id === "add-server") { ev.preventDefault(); addServer(form); return; }
    if (form.classList.contains("answer")) { ev.preventDefault(); answerApproval(form); return; }
    if (form.classList.contains("question-form")) { ev.preventDefault(); answerQuestion(form, ev.submitter); }
  });

  document.addEventListener("change", (ev) => {
    const t = ev.target;
    if (t.matches("select[data-autosubmit]")) t.form.requestSubmit();
    if (t.matches('input[name="transport"]')) transportFields(t.form);
  });

  document.addEventListener("keydown", (ev) => {
    // Enter sends, Shift+Enter makes a new line.
    if (ev.target.matches("#composer textarea") && ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      ev.target.form.requestSubmit();
    }
  });

  // The conversation list folds away on a narrow screen (palui.css); this button opens it.
  document.addEventListener("click", (ev) => {
    const b = ev.target.closest("#conversations-toggle");
    if (!b) return;
    const aside = b.closest(".conversations");
    const open = aside.classList.toggle("open");
    b.setAttribute("aria-expanded", open ? "true" : "false");
  });

  // For the browser tests: the same renderer the stream uses, on events a test makes up.
  window.PaluiChat = { renderEvent: renderEvent, streamInto: streamInto, endStream: endStream,
                       discardStream: discardStream };

  document.addEventListener("DOMContentLoaded", () => {
    startCountdowns(document);
    document.querySelectorAll("article.turn").forEach(watch);
    updateStop();
    const add = document.getElementById("add-server");
    if (add) transportFields(add);
    const turns = document.getElementById("turns");
    if (turns && turns.lastElementChild && !location.hash) turns.lastElementChild.scrollIntoView({ block: "end" });
  });
})();
