// Cairn Studio: the page. Hand-written, no build step, no library; every text from the
// server goes into the page as text (never as HTML).
"use strict";

const params = new URLSearchParams(location.search);
// The one-time code (of the file the browser was opened on) or the printed token stays out of
// the address bar (and of screenshots and history): it is exchanged below for this tab's
// session, kept in sessionStorage (per origin, port included; a cookie would also go to any
// other server on 127.0.0.1).
history.replaceState(null, "", location.pathname + (params.get("thread") ? "?thread=" + encodeURIComponent(params.get("thread")) : ""));
let SESSION = sessionStorage.getItem("cairn-studio-session") || "";

// Exchanges the address's code or token for a session, once; without either, the tab's own.
async function login() {
  const given = params.get("code") ? { code: params.get("code") } : params.get("token") ? { token: params.get("token") } : null;
  if (!given) return;
  const r = await fetch("/api/session", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(given) });
  const json = await r.json().catch(() => null);
  if (!r.ok) throw new ApiError(json, r.status);
  SESSION = json.session;
  sessionStorage.setItem("cairn-studio-session", SESSION);
}

const state = { thread: params.get("thread"), threads: [], checkpoint: null, events: 0, diff: null };

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

class ApiError extends Error {
  constructor(body, status) {
    const e = (body && body.error) || {};
    super(e.message || "HTTP " + status);
    this.kind = e.kind || "IO";
    this.meaning = e.meaning || "";
    this.status = status;
  }
}

async function api(path, body) {
  const init = { headers: { Authorization: "Bearer " + SESSION } };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const json = await r.json().catch(() => null);
  if (!r.ok) throw new ApiError(json, r.status);
  return json;
}

function errorBox(err) {
  return el("div", { class: "error", "data-kind": err.kind || "" },
    el("span", { class: "kind-name" }, err.kind || "ERROR"), " ",
    err.meaning ? el("div", {}, err.meaning) : null,
    el("div", { class: "muted" }, err.message));
}

// Replaces a node's children, leaving out the parts that are not there (null, false).
function put(node, ...kids) {
  node.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
}

function showError(err) {
  const box = document.getElementById("error");
  put(box, ...errorBox(err).childNodes);
  box.hidden = false;
}

function clearError() { document.getElementById("error").hidden = true; }

const time = (ms) => new Date(ms).toLocaleString();
function size(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}
const shortId = (id) => (id || "").replace(/^(e_|t_|cp_)/, "").slice(0, 10);

// ---- threads ----

async function loadThreads() {
  const j = await api("/v1/threads");
  document.getElementById("root").textContent = j.root;
  state.threads = j.threads;
  const ul = document.getElementById("threads");
  ul.replaceChildren(...j.threads.map((t) => el("li", {
    "data-thread": t.id,
    class: t.id === state.thread ? "selected" : "",
    onclick: () => selectThread(t.id),
  }, t.id, el("span", { class: "sub" },
    t.parent_thread ? "fork of " + t.parent_thread : time(t.created_ms)))));
}

function selectThread(id) {
  state.thread = id;
  history.replaceState(null, "", "?thread=" + encodeURIComponent(id));
  for (const li of document.querySelectorAll("#threads li")) li.classList.toggle("selected", li.dataset.thread === id);
  loadThread().catch(showError);
}

async function loadThread() {
  const id = state.thread;
  if (!id) return;
  let offset = 0, total = 1, entries = [], j;
  while (offset < total) {   // pages of up to 500 entries
    j = await api("/v1/threads/" + encodeURIComponent(id) + "?offset=" + offset);
    entries = entries.concat(j.entries);
    total = j.total;
    offset += j.entries.length;
    if (!j.entries.length) break;
  }
  if (id !== state.thread) return;
  renderThread(j.thread, entries, j.forks);
}

function renderThread(thread, entries, forks) {
  const byId = new Map(entries.map((e) => [e.id, e]));
  const kids = new Map();
  const roots = [];
  for (const e of entries) {
    if (e.parent_id && byId.has(e.parent_id)) {
      if (!kids.has(e.parent_id)) kids.set(e.parent_id, []);
      kids.get(e.parent_id).push(e);
    } else roots.push(e);
  }
  const forksAt = new Map();
  for (const f of forks) {
    if (!forksAt.has(f.fork_entry)) forksAt.set(f.fork_entry, []);
    forksAt.get(f.fork_entry).push(f.thread_id);
  }
  const countBelow = (e) => {
    let n = 0;
    const stack = [e];
    while (stack.length) { const x = stack.pop(); n++; stack.push(...(kids.get(x.id) || [])); }
    return n;
  };
  // One chain: each entry, then its first (or active) child on the same level, and every other
  // child as a collapsed "earlier history" holding its own chain.
  const chain = (start) => {
    const out = [];
    let cur = start;
    while (cur) {
      out.push(entryRow(cur, forksAt.get(cur.id) || []));
      const children = kids.get(cur.id) || [];
      const next = children.find((c) => c.on_active_branch) || (cur.on_active_branch ? null : children[children.length - 1]);
      for (const c of children) {
        if (c === next) continue;
        const d = el("details", { class: "history", "data-branch": c.id },
          el("summary", {}, "Earlier history: " + countBelow(c) + " entries a rewind cut here"));
        let filled = false;
        d.addEventListener("toggle", () => { if (d.open && !filled) { filled = true; d.append(...chain(c)); } });
        out.push(d);
      }
      cur = next;
    }
    return out;
  };
  const active = entries.filter((e) => e.on_active_branch).length;
  const head = [el("h3", {}, "Thread " + thread.id),
    el("div", { class: "muted" }, entries.length + " entries, " + active + " on the active branch; leaf " + (thread.active_leaf || "none"))];
  if (thread.parent_thread) {
    head.push(el("div", { class: "forked-from" }, "Forked from ",
      el("a", { onclick: () => selectThread(thread.parent_thread) }, thread.parent_thread),
      " at " + (thread.fork_entry || "?")));
  }
  const body = [];
  for (const r of roots) body.push(...chain(r));
  if (!entries.length) body.push(el("p", { class: "muted" }, "No entries yet."));
  put(document.getElementById("thread"), ...head, el("div", { id: "tree" }, body));
}

// A checkpoint's label, unless it is only the id of its entry (as user checkpoints are labelled).
const label = (c, e) => (c.label && c.label !== e.id ? c.label : "");

function entryRow(e, forkIds) {
  const cps = e.checkpoints.map((c) => el("span", {
    class: "cp" + (state.checkpoint && state.checkpoint.snapshot_id === c.snapshot_id ? " selected" : ""),
    "data-snapshot": c.snapshot_id,
    title: "checkpoint " + c.checkpoint_id + " (" + c.kind + "), snapshot " + c.snapshot_id,
    onclick: () => selectCheckpoint(c, e),
  }, "◆ files before this " + (c.kind === "user" ? "message" : c.kind) + (label(c, e) ? " “" + label(c, e).slice(0, 30) + "”" : "") +
    " · " + time(c.created_ms) + " · " + c.files + " files, " + size(c.bytes) +
    (c.skipped_count ? " · " + c.skipped_count + " skipped" : "")));
  return el("div", { class: "entry" + (e.on_active_branch ? "" : " cut"), "data-entry": e.id, "data-active": e.on_active_branch ? "1" : "0" },
    el("div", { class: "meta" },
      el("span", { class: "kind " + e.kind }, e.kind), el("span", {}, shortId(e.id)), el("span", {}, time(e.created_ms)),
      el("span", { class: "actions" },
        el("button", { class: "rewind", title: "Rewind the thread to this entry", onclick: () => askRewind(e) }, "Rewind here"),
        el("button", { class: "fork-btn", title: "Fork a new thread from this entry", onclick: () => askFork(e) }, "Fork"))),
    el("div", { class: "text" }, e.text + (e.text_chars > e.text.length ? "…" : "")),
    cps.length ? el("div", {}, cps) : null,
    forkIds.map((t) => el("div", { class: "fork" }, "↳ forked here as thread ", el("a", { "data-fork": t, onclick: () => selectThread(t) }, t))));
}

// ---- checkpoints and diffs ----

function selectCheckpoint(c, e) {
  state.checkpoint = c;
  for (const s of document.querySelectorAll(".cp")) s.classList.toggle("selected", s.dataset.snapshot === c.snapshot_id);
  const side = document.getElementById("side");
  const skipped = c.skipped.map((s) => el("li", {}, s.path + " (" + s.reason + ")"));
  put(side,
    el("h3", {}, "Checkpoint before " + e.kind + " entry " + shortId(e.id)),
    label(c, e) ? el("div", {}, "label: " + label(c, e)) : null,
    el("div", { class: "muted" }, c.checkpoint_id + " (" + c.kind + ") · " + time(c.created_ms) + " · snapshot " + c.snapshot_id.slice(0, 12)),
    el("div", {}, c.files + " files, " + size(c.bytes) + (c.skipped_count ? "" : "; nothing skipped")),
    c.skipped_count ? el("div", { class: "section" }, el("h4", {}, "Skipped (" + c.skipped_count + ")"), el("ul", { class: "files" }, skipped)) : null,
    el("div", { class: "buttons" },
      el("button", { id: "show-turn", onclick: () => showDiff(c.snapshot_id, c.next_snapshot_id, "What this turn changed") }, "What this turn changed"),
      " ",
      el("button", { id: "show-since", onclick: () => showDiff(c.snapshot_id, null, "What changed since") }, "What changed since"),
      " ",
      el("button", { id: "restore-btn", class: "danger", onclick: () => askRestore(c) }, "Restore these files")),
    el("div", { id: "diff" }));
}

async function showDiff(from, to, title) {
  const box = document.getElementById("diff");
  box.replaceChildren(el("p", { class: "muted" }, "computing…"));
  try {
    const q = "from=" + from + "&to=" + (to || "live");
    const j = await api("/v1/diff?" + q + "&attribute=true");
    state.diff = { q, total: j.total, loaded: j.changes.length };
    const list = el("ul", { class: "files", id: "diff-files" }, j.changes.map((c) => fileRow(c, q)));
    const more = el("button", { class: "more" }, "more files");
    more.hidden = j.changes.length >= j.total;
    more.addEventListener("click", async () => {
      const k = await api("/v1/diff?" + q + "&attribute=true&offset=" + state.diff.loaded);
      list.append(...k.changes.map((c) => fileRow(c, q)));
      state.diff.loaded += k.changes.length;
      more.hidden = state.diff.loaded >= k.total;
    });
    box.replaceChildren(
      el("h4", {}, title + ": " + from.slice(0, 12) + " → " + (to ? to.slice(0, 12) : "the files now")),
      el("div", { class: "muted", id: "diff-summary" }, j.total + " paths: " + j.added + " added, " + j.modified + " modified, " + j.deleted + " deleted"),
      list, more, el("div", { id: "patch" }));
  } catch (err) { box.replaceChildren(errorBox(err)); }
}

function fileRow(c, q) {
  const letter = { added: "A", modified: "M", deleted: "D", mode_changed: "m", type_changed: "T" }[c.kind] || "?";
  const who = (c.attribution || []).map(whoText).join("; ");
  const li = el("li", { "data-path": c.path, onclick: () => showPatch(li, c, q) },
    el("span", { class: "ch " + c.kind }, letter), c.path,
    who ? el("span", { class: "who muted", title: "changed in the interval this checkpoint opened" }, " by " + who) : null);
  return li;
}

// Who opened a checkpoint interval: the tool call (its tool, the subagent), else the label.
function whoText(a) {
  const who = a.tool_use_id || a.label || a.from.slice(0, 12);
  const more = [a.tool_name, a.agent_id ? "agent " + a.agent_id : null].filter(Boolean);
  return more.length ? who + " (" + more.join(", ") + ")" : who;
}

async function showPatch(li, c, q) {
  for (const x of document.querySelectorAll("#diff-files li")) x.classList.toggle("selected", x === li);
  const box = document.getElementById("patch");
  try {
    const j = await api("/v1/patch?" + q + "&path_hex=" + c.path_hex);
    if (j.binary) { box.replaceChildren(el("p", { class: "binary" }, "Binary file " + j.path + " differs (not shown)")); return; }
    if (!j.patch) { box.replaceChildren(el("p", { class: "muted" }, j.path + ": only its mode or kind changed")); return; }
    const lines = j.patch.split("\n");
    if (lines[lines.length - 1] === "") lines.pop();
    box.replaceChildren(el("pre", { class: "patch" }, lines.map((l) => el("span", {
      class: l.startsWith("+++") || l.startsWith("---") ? "head" : l.startsWith("@@") ? "hunk" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : "",
    }, l || " "))));
  } catch (err) { box.replaceChildren(errorBox(err)); }
}

// ---- rewind, restore, fork: plan, confirm, undo ----

function askRewind(e) {
  plan({ op: "rewind", thread: state.thread, entry: e.id, files: true });
}

function askFork(e) {
  plan({ op: "fork", thread: state.thread, entry: e.id, files: false });
}

function askRestore(c) { plan({ op: "restore", snapshot: c.snapshot_id }); }

function pathSection(title, list, count, cls) {
  if (!count) return null;
  return el("div", { class: "section " + cls },
    el("h4", {}, title + " (" + count + ")"),
    el("ul", {}, list.map((p) => el("li", {}, p)), count > list.length ? el("li", { class: "muted" }, "… and " + (count - list.length) + " more") : null));
}

function planBody(v) {
  const parts = [el("h3", { id: "plan-title" }, (v.dry_run ? "Plan: " : "Done: ") + v.title)];
  const f = v.files;
  if (f) {
    parts.push(el("div", { class: "muted" }, "files: snapshot " + f.snapshot_id.slice(0, 12) + " into " + f.root + "; " + f.unchanged + " unchanged"));
    parts.push(pathSection(v.dry_run ? "Files to restore" : "Files restored", f.restore, f.restore_count, "restore"));
    parts.push(pathSection(v.dry_run ? "Files to delete" : "Files deleted", f.delete, f.delete_count, "delete"));
    parts.push(pathSection("Files kept as they are", f.keep, f.keep_count, "keep"));
    parts.push(pathSection("Edited by someone else since (drift)", f.drifted, f.drifted.length, "drifted"));
    if (f.busy) parts.push(el("div", { class: "warn" }, "BUSY: a command or hold stands on the workspace; the restore would be refused now."));
    if (!f.restore_count && !f.delete_count) parts.push(el("div", { class: "muted" }, "No file changes."));
  } else if (v.op !== "restore") {
    parts.push(el("div", { class: "muted" }, "files: left as they are"));
  }
  if (v.cut_count) parts.push(pathSection(v.dry_run ? "Conversation entries to cut (kept as earlier history)" : "Conversation entries cut (kept as earlier history)",
    v.cut.map((c) => shortId(c.id) + "  " + c.kind + "  " + c.text.slice(0, 80)), v.cut_count, "cut"));
  if (v.runs_dropped) parts.push(el("div", { class: "warn" }, v.runs_dropped + " runs would be stopped or dropped"));
  for (const line of v.agent || []) parts.push(el("div", { class: "agent" }, line));
  return parts;
}

let pending = null;

// The choices a plan depends on; changing one plans again, so the plan shown is the one confirmed.
// What to do with files someone else edited since (drift): as `--on-drift` takes it. A
// rewind with files refuses by default (as `cairn rewind --files`), a restore checks only
// when a choice is made.
function driftControl(request, dflt) {
  const current = request.on_drift || dflt;
  const choices = [["", "do not check"], ["refuse", "refuse the change"], ["keep", "keep them as they are"], ["overwrite", "overwrite them (the safety snapshot keeps them)"]]
    .filter(([v]) => v !== "" || !dflt);
  const select = el("select", {
    id: "plan-drift",
    onchange: (ev) => plan({ ...request, on_drift: ev.target.value || null, key: null }),
  }, choices.map(([v, label]) => el("option", { value: v, selected: v === (current || "") ? true : null }, label)));
  return el("div", {}, el("label", {}, "Files edited by someone else since: ", select));
}

function planControls(request) {
  if (request.op === "rewind") {
    const out = [el("label", {}, el("input", {
      type: "checkbox", id: "plan-files", checked: request.files ? true : null,
      onchange: (ev) => plan({ ...request, files: ev.target.checked, on_drift: null, key: null }),
    }), " restore the files too")];
    if (request.files) out.push(driftControl(request, "refuse"));
    return out;
  }
  if (request.op === "restore") return [driftControl(request, null)];
  if (request.op === "fork") {
    const into = el("input", { type: "text", id: "plan-into", size: 40, placeholder: "a new directory (empty: this workspace)", value: request.into || "" });
    const files = el("input", { type: "checkbox", id: "plan-fork-files", checked: request.files ? true : null });
    const again = () => plan({ op: "fork", thread: request.thread, entry: request.entry, files: files.checked, into: into.value || null });
    files.addEventListener("change", again);
    return [el("div", {}, el("label", {}, files, " with its files, into "), into, " ",
      el("button", { id: "plan-again", onclick: again }, "Plan again"))];
  }
  return [];
}

async function plan(request) {
  clearError();
  // A rewind carries a request key, made once per plan shown: confirming again (a retry
  // after a failure) answers the same rewind and never runs a second one.
  if (request.op === "rewind" && !request.key) request = { ...request, key: "studio-" + crypto.randomUUID() };
  let p = null, err = null;
  try { p = await api("/v1/plans", request); } catch (e) { err = e; }
  pending = p;
  const confirm = document.getElementById("plan-confirm");
  confirm.hidden = !p;
  confirm.disabled = false;
  document.getElementById("plan-cancel").textContent = p ? "Cancel" : "Close";
  put(document.getElementById("plan"), ...planControls(request),
    err ? [el("h3", { id: "plan-title" }, "Refused: " + request.op), errorBox(err)]
      : [...planBody(p.plan), el("div", { class: "digest" }, "plan digest " + p.digest)]);
  document.getElementById("modal").hidden = false;
}

async function confirmPlan() {
  if (!pending) return;
  const confirm = document.getElementById("plan-confirm");
  confirm.disabled = true;
  const box = document.getElementById("plan");
  try {
    const done = await api("/v1/plans/apply", { request: pending.request, digest: pending.digest });
    pending = null;
    confirm.hidden = true;
    document.getElementById("plan-cancel").textContent = "Close";
    const result = el("div", { class: "ok", id: "result" }, "Done.");
    if (done.safety_snapshot_id) {
      result.append(" Safety snapshot ", el("code", { id: "safety" }, done.safety_snapshot_id.slice(0, 12)),
        " holds the files as they were. ",
        el("button", { id: "undo", onclick: () => plan(done.undo) }, "Undo"));
    }
    put(box, result, ...planBody(done));
    refresh();
  } catch (err) {
    confirm.disabled = false;
    box.prepend(errorBox(err));
  }
}

function closeModal() { document.getElementById("modal").hidden = true; pending = null; }

// ---- live updates ----

let refreshTimer = null;
function refresh() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => { loadThreads().then(loadThread).catch(showError); }, 50);
}

function listen() {
  const live = document.getElementById("live");
  const es = new EventSource("/v1/events?token=" + encodeURIComponent(SESSION));
  es.addEventListener("ready", () => { live.textContent = "live"; live.className = "live on"; });
  es.addEventListener("cairn", () => { state.events++; live.dataset.events = state.events; refresh(); });
  es.onerror = () => { live.textContent = "reconnecting…"; live.className = "live off"; };
}

document.getElementById("plan-confirm").addEventListener("click", confirmPlan);
document.getElementById("plan-cancel").addEventListener("click", closeModal);
// The session first, then the threads, then the thread of the address (or the first one).
login().then(() => {
  listen();
  return loadThreads().then(() => {
    if (!state.thread && state.threads.length) selectThread(state.threads[0].id);
    else return loadThread();
  });
}).catch(showError);
