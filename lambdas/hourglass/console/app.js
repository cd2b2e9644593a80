// Hourglass console: a static page over the REST API. The key stays in sessionStorage (this tab only);
// every value from the API is written with textContent, never as HTML.
"use strict";

const STATUSES = ["pending", "delivering", "delivered", "failed", "cancelled", "expired"];
const COUNT_CAP = 5000;
const BASE = location.pathname.replace(/\/console\/?$/, "");
const $ = (selector) => document.querySelector(selector);

const state = { queue: null, cursor: null, view: "queues" };

function notice(text, isError) {
  const el = $("#notice");
  el.textContent = text || "";
  el.className = isError ? "error" : "";
}

// What a view's loader says about its result: never hides an error that a later action showed.
function info(text) {
  if (!$("#notice").classList.contains("error")) notice(text);
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = sessionStorage.getItem("hourglass.key");
  if (key) headers["x-api-key"] = key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(BASE + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "omit",
  });
  const text = await response.text();
  const doc = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = (doc && doc.error) || {};
    throw new ApiError(response.status, error.code || "http_error", error.message || text);
  }
  return doc;
}

const enc = encodeURIComponent;
const queuePath = (queue) => `/v1/queues/${enc(queue)}`;

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function button(label, className, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.className = className;
  b.addEventListener("click", onClick);
  return b;
}

const short = (value) => {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 80 ? text.slice(0, 79) + "…" : text;
};
const when = (iso) => (iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "");

// A view's loader may be started again before its last run answered: only the latest run may draw.
const runs = {};
function newRun(kind) {
  const run = (runs[kind] || 0) + 1;
  runs[kind] = run;
  return () => runs[kind] === run;
}

async function guarded(action) {
  try {
    notice("");
    await action();
  } catch (error) {
    notice(error.message, true);
  }
}

// --- queues -------------------------------------------------------------------------------------

async function allQueues() {
  const queues = [];
  let cursor = null;
  do {
    const page = await api("GET", "/v1/queues?limit=1000" + (cursor ? `&cursor=${enc(cursor)}` : ""));
    queues.push(...page.queues);
    cursor = page.next_cursor;
  } while (cursor);
  return queues;
}

async function countStatus(queue, status) {
  let count = 0;
  let cursor = null;
  do {
    const query = `?status=${status}&limit=1000` + (cursor ? `&cursor=${enc(cursor)}` : "");
    const page = await api("GET", `${queuePath(queue)}/messages${query}`);
    count += page.messages.length;
    cursor = page.next_cursor;
  } while (cursor && count < COUNT_CAP);
  return cursor ? `${count}+` : String(count);
}

function fillQueueSelect(names) {
  const select = $("#queue-select");
  select.replaceChildren(...names.map((name) => new Option(name, name)));
  if (names.length && !names.includes(state.queue)) state.queue = names[0];
  select.value = state.queue || "";
}

function queueRow(queue) {
  const name = queue.name;
  const row = document.createElement("tr");
  row.dataset.queue = name;
  cell(row, name, "mono");
  const target = queue.target || {};
  cell(row, target.url || target.queue_url || "");
  const limits = ["rate_limit", "max_concurrency", "timeout"]
    .filter((k) => queue[k] !== undefined && queue[k] !== null).map((k) => `${k}=${queue[k]}`);
  const retry = queue.retry || {};
  limits.push(`retry ${retry.max_attempts}x`);
  cell(row, limits.join(", "), "limits");
  cell(row, queue.paused ? "paused" : "active", `state ${queue.paused ? "status-failed" : "status-delivered"}`);
  STATUSES.forEach((s) => cell(row, "…", `count count-${s}`));
  const actions = document.createElement("td");
  actions.append(
    button("Messages", "open", () => { selectQueue(name); show("messages"); }),
    button(queue.paused ? "Resume" : "Pause", "pause-toggle", () => guarded(async () => {
      await api("POST", `${queuePath(name)}/${queue.paused ? "resume" : "pause"}`);
      await loadQueues();
    })),
  );
  row.appendChild(actions);
  return row;
}

async function fillCounts(row, stillWanted) {
  const counts = await Promise.all(STATUSES.map((s) => countStatus(row.dataset.queue, s)));
  if (!stillWanted()) return;
  STATUSES.forEach((s, i) => { row.querySelector(`td.count-${s}`).textContent = counts[i]; });
  row.dataset.counted = "true";
}

async function loadQueues() {
  const latest = newRun("queues");
  const stillWanted = () => latest() && state.view === "queues";
  // Only rows counted by the latest run carry data-counted (what the browser tests wait for).
  document.querySelectorAll("#queues-table tr[data-counted]").forEach((r) => { delete r.dataset.counted; });
  const queues = await allQueues();
  if (!latest()) return;
  fillQueueSelect(queues.map((q) => q.name));
  const rows = queues.map(queueRow);
  $("#queues-table tbody").replaceChildren(...rows);
  if (!queues.length) info("No queues yet: create one with PUT /v1/queues/{name} or `hourglass queues put`.");
  // Counts cost one listing per status: the selected queue first, then the others a few at a time.
  const order = [...rows.filter((r) => r.dataset.queue === state.queue), ...rows.filter((r) => r.dataset.queue !== state.queue)];
  const worker = async () => {
    while (order.length && stillWanted()) await fillCounts(order.shift(), stillWanted);
  };
  // Not awaited: the table is usable (and the queue list known) before every row is counted.
  Promise.all([worker(), worker(), worker()]).catch((error) => notice(error.message, true));
  return queues.map((q) => q.name);
}

function selectQueue(name) {
  state.queue = name;
  $("#queue-select").value = name;
}

// --- messages -----------------------------------------------------------------------------------

function messageRow(m, selectable) {
  const row = document.createElement("tr");
  row.dataset.id = m.id;
  const pick = document.createElement("td");
  if (selectable) {
    const box = document.createElement("input");
    box.type = "checkbox";
    box.className = "pick";
    box.value = m.id;
    pick.appendChild(box);
  }
  row.appendChild(pick);
  const id = cell(row, m.id, "mono");
  id.appendChild(document.createTextNode(" "));
  id.appendChild(button("timeline", "open-timeline", () => guarded(() => openTimeline(m.queue, m.id))));
  cell(row, m.status, `status status-${m.status}`);
  cell(row, when(m.due_at));
  cell(row, `${m.flow_key ?? "—"} · p${m.priority ?? 5}`, "mono");
  cell(row, m.attempts);
  cell(row, m.last_error || "");
  cell(row, short(m.body), "body mono");
  return row;
}

async function listMessages(more) {
  if (!state.queue) return notice("Pick a queue first.", true);
  const params = new URLSearchParams({ limit: "50" });
  const status = $("#status-filter").value;
  const schedule = $("#schedule-filter").value.trim();
  if (status) params.set("status", status);
  if (schedule) params.set("schedule", schedule);
  if (more && state.cursor) params.set("cursor", state.cursor);
  const latest = newRun("messages");
  const page = await api("GET", `${queuePath(state.queue)}/messages?${params}`);
  if (!latest()) return;
  const tbody = $("#messages-table tbody");
  if (!more) tbody.replaceChildren();
  page.messages.forEach((m) => tbody.appendChild(messageRow(m, true)));
  state.cursor = page.next_cursor;
  $("#more").hidden = !page.next_cursor;
  info(`${tbody.children.length} message(s) shown`);
}

function picked(table) {
  return Array.from(document.querySelectorAll(`${table} input.pick:checked`)).map((box) => box.value);
}

async function eachMessage(ids, verb, call) {
  let done = 0;
  const failures = [];
  for (const id of ids) {
    try {
      await call(id);
      done += 1;
    } catch (error) {
      failures.push(`${id}: ${error.message}`);
    }
  }
  notice(`${verb} ${done} of ${ids.length}` + (failures.length ? ` — ${failures.join("; ")}` : ""), failures.length > 0);
}

// --- timeline -----------------------------------------------------------------------------------

function event(list, time, text, className) {
  const li = document.createElement("li");
  const at = document.createElement("span");
  at.className = "mono";
  at.textContent = when(time) + " ";
  const what = document.createElement("span");
  what.textContent = text;
  if (className) what.className = className;
  li.append(at, what);
  list.appendChild(li);
}

async function openTimeline(queue, id) {
  const m = await api("GET", `${queuePath(queue)}/messages/${enc(id)}`);
  let attempts = null;
  try {
    attempts = (await api("GET", `${queuePath(queue)}/messages/${enc(id)}/attempts`)).attempts;
  } catch (error) {
    if (error.status !== 404 || !/no route/.test(error.message)) throw error;
  }
  $("#timeline").hidden = false;
  $("#timeline").dataset.queue = queue;
  $("#timeline").dataset.id = id;
  $("#timeline-id").textContent = id;
  const doc = $("#timeline-doc");
  doc.replaceChildren();
  for (const key of ["queue", "status", "due_at", "expires_at", "attempts", "dedup_id", "flow_key", "priority", "last_error"]) {
    const dt = document.createElement("dt");
    dt.textContent = key;
    const dd = document.createElement("dd");
    dd.textContent = m[key] === null || m[key] === undefined ? "—" : String(m[key]);
    if (key === "status") dd.className = `status-${m.status}`;
    doc.append(dt, dd);
  }
  const list = $("#timeline-events");
  list.replaceChildren();
  event(list, m.created_at, "created");
  event(list, m.due_at, "due (handed off to the timer queue ahead of this time)");
  if (attempts) {
    for (const a of attempts) {
      const code = a.status_code === null || a.status_code === undefined ? "" : ` HTTP ${a.status_code}`;
      const error = a.error && a.error !== `HTTP ${a.status_code}` ? ` — ${a.error}` : "";
      const retry = a.retry_at ? `, retry at ${when(a.retry_at)}` : "";
      event(list, a.started_at, `attempt ${a.attempt}: ${a.outcome}${code}${error}${retry}`, `status-${a.outcome}`);
    }
  } else if (m.attempts) {
    event(list, null, `${m.attempts} attempt(s)` + (m.last_error ? `, last error: ${m.last_error}` : ""));
  }
  if (m.status === "delivered") event(list, m.delivered_at, "delivered", "status-delivered");
  if (["failed", "expired", "cancelled"].includes(m.status)) event(list, null, m.status, `status-${m.status}`);
  $("#cancel-message").disabled = m.status !== "pending";
  $("#redeliver-message").disabled = !["failed", "expired", "delivered"].includes(m.status);
}

// --- failed, schedules, lateness ----------------------------------------------------------------

async function loadFailed() {
  if (!state.queue) return;
  const latest = newRun("failed");
  const rows = [];
  for (const status of ["failed", "expired"]) {
    let cursor = null;
    do {
      const query = `?status=${status}&limit=200` + (cursor ? `&cursor=${enc(cursor)}` : "");
      const page = await api("GET", `${queuePath(state.queue)}/messages${query}`);
      page.messages.forEach((m) => rows.push(messageRow(m, true)));
      cursor = page.next_cursor;
    } while (cursor && rows.length < 1000);
  }
  if (!latest()) return;
  $("#failed-table tbody").replaceChildren(...rows);
  info(`${rows.length} failed or expired message(s)`);
}

async function loadSchedules() {
  if (!state.queue) return;
  const latest = newRun("schedules");
  const found = [];
  let cursor = null;
  do {
    const page = await api("GET", `${queuePath(state.queue)}/schedules` + (cursor ? `?cursor=${enc(cursor)}` : ""));
    found.push(...page.schedules);
    cursor = page.next_cursor;
  } while (cursor);
  if (!latest()) return;
  const tbody = $("#schedules-table tbody");
  tbody.replaceChildren(...found.map(scheduleRow));
  if (!tbody.children.length) info("No schedules on this queue.");
}

function scheduleRow(s) {
  const row = document.createElement("tr");
  row.dataset.schedule = s.name;
  cell(row, s.name, "mono");
  cell(row, s.cron ? s.cron : `every ${s.every} s`, "mono");
  cell(row, s.timezone || "UTC");
  cell(row, s.paused ? "paused" : "active");
  cell(row, (s.next_due_at || []).map(when).join(", "), "mono next");
  cell(row, short(s.body), "body mono");
  row.appendChild(scheduleActions(s));
  return row;
}

function scheduleActions(s) {
  const path = `${queuePath(state.queue)}/schedules/${enc(s.name)}`;
  const actions = document.createElement("td");
  actions.append(
    button(s.paused ? "Resume" : "Pause", "schedule-toggle", () => guarded(async () => {
      await api("POST", `${path}/${s.paused ? "resume" : "pause"}`);
      await loadSchedules();
      notice(`schedule ${s.name} ${s.paused ? "resumed" : "paused"}`);
    })),
    button("Occurrences", "schedule-messages", () => {
      $("#schedule-filter").value = s.name;
      $("#status-filter").value = "";
      show("messages");
    }),
    button("Delete", "schedule-delete", () => guarded(async () => {
      if (!confirm(`Delete schedule ${s.name}? Its pending occurrence is cancelled.`)) return;
      await api("DELETE", path);
      await loadSchedules();
      notice(`deleted schedule ${s.name}`);
    })),
  );
  return actions;
}

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    return text;
  }
}

async function saveSchedule() {
  if (!state.queue) return notice("Pick a queue first.", true);
  const name = $("#schedule-name").value.trim();
  const rule = $("#schedule-when").value.trim();
  const doc = /^\d+(\.\d+)?$/.test(rule) ? { every: Number(rule) } : { cron: rule };
  const timezone = $("#schedule-timezone").value.trim();
  if (timezone) doc.timezone = timezone;
  const body = $("#schedule-body").value.trim();
  if (body) doc.body = parsed(body);
  await api("PUT", `${queuePath(state.queue)}/schedules/${enc(name)}`, doc);
  $("#schedule-form").reset();
  await loadSchedules();
  notice(`saved schedule ${name}`);
}

// --- bulk operations ----------------------------------------------------------------------------

async function runOperation(request) {
  const base = `${queuePath(state.queue)}/operations`;
  let op = await api("POST", base, request);
  while (op.status === "running") {
    notice(`operation ${op.id} running: matched ${op.matched}, applied ${op.applied}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    op = await api("GET", `${base}/${enc(op.id)}`);
  }
  return op;
}

function operationText(op) {
  const error = op.error ? ` — ${op.error}` : "";
  return `${op.action} ${op.status}: matched ${op.matched}, applied ${op.applied}, skipped ${op.skipped}${error}`;
}

async function startOperation() {
  if (!state.queue) return notice("Pick a queue first.", true);
  const action = $("#op-action").value;
  const filter = {};
  const status = $("#status-filter").value;
  if (status) filter.status = status;
  const after = $("#op-due-after").value.trim();
  const before = $("#op-due-before").value.trim();
  if (after) filter.due_after = after;
  if (before) filter.due_before = before;
  const request = { action, filter };
  if (action === "shift") request.seconds = Number($("#op-seconds").value);
  const op = await runOperation(request);
  await listMessages(false);
  notice(operationText(op), op.status !== "succeeded");
}

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] : 0;
}

function svg(name, attrs, text) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", name);
  Object.entries(attrs).forEach(([k, v]) => el.setAttribute(k, String(v)));
  if (text !== undefined) el.textContent = text;
  return el;
}

async function loadLateness() {
  if (!state.queue) return;
  const latest = newRun("lateness");
  const points = [];
  let cursor = null;
  do {
    const query = "?status=delivered&limit=1000" + (cursor ? `&cursor=${enc(cursor)}` : "");
    const page = await api("GET", `${queuePath(state.queue)}/messages${query}`);
    for (const m of page.messages) {
      if (m.delivered_at && m.due_at) {
        points.push({ due: Date.parse(m.due_at), late: Date.parse(m.delivered_at) - Date.parse(m.due_at) });
      }
    }
    cursor = page.next_cursor;
  } while (cursor && points.length < COUNT_CAP);
  if (latest()) drawLateness(points);
}

function drawLateness(points) {
  const chart = $("#lateness-chart");
  chart.replaceChildren();
  const sorted = points.map((p) => p.late).sort((a, b) => a - b);
  const p50 = percentile(sorted, 0.5);
  const p99 = percentile(sorted, 0.99);
  $("#lateness-summary").textContent = points.length
    ? `${points.length} delivered: p50 ${p50} ms, p99 ${p99} ms, max ${sorted[sorted.length - 1]} ms`
    : "No delivered messages yet.";
  if (!points.length) return;
  const [w, h, left, bottom] = [720, 260, 56, 24];
  const t0 = Math.min(...points.map((p) => p.due));
  const t1 = Math.max(...points.map((p) => p.due), t0 + 1);
  const top = Math.max(sorted[sorted.length - 1], 1);
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (w - left - 10);
  const y = (ms) => h - bottom - (ms / top) * (h - bottom - 10);
  chart.appendChild(svg("line", { x1: left, y1: h - bottom, x2: w - 5, y2: h - bottom, stroke: "#889" }));
  chart.appendChild(svg("line", { x1: left, y1: 5, x2: left, y2: h - bottom, stroke: "#889" }));
  chart.appendChild(svg("text", { x: 4, y: 14, "font-size": 11 }, `${top} ms`));
  chart.appendChild(svg("text", { x: 4, y: h - bottom, "font-size": 11 }, "0 ms"));
  chart.appendChild(svg("text", { x: left, y: h - 6, "font-size": 11 }, "due time →"));
  for (const [value, label, colour] of [[p50, "p50", "#1a56c4"], [p99, "p99", "#b00020"]]) {
    chart.appendChild(svg("line", { x1: left, y1: y(value), x2: w - 5, y2: y(value), stroke: colour, "stroke-dasharray": "4 3" }));
    chart.appendChild(svg("text", { x: w - 40, y: y(value) - 3, "font-size": 11, fill: colour, class: `label-${label}` }, label));
  }
  for (const p of points) {
    chart.appendChild(svg("circle", { cx: x(p.due), cy: y(p.late), r: 2.5, fill: "#137333", class: "point" }));
  }
}

// --- wiring -------------------------------------------------------------------------------------

const loaders = { queues: loadQueues, messages: () => listMessages(false), failed: loadFailed, schedules: loadSchedules, lateness: loadLateness };

function show(view) {
  state.view = view;
  document.querySelectorAll("nav button").forEach((b) => b.classList.toggle("active", b.dataset.view === view));
  document.querySelectorAll(".view").forEach((s) => { s.hidden = s.id !== `view-${view}`; });
  return guarded(loaders[view]);
}

function wire() {
  $("#key").value = sessionStorage.getItem("hourglass.key") || "";
  $("#key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem("hourglass.key", $("#key").value.trim());
    show(state.view);
  });
  $("#forget-key").addEventListener("click", () => { sessionStorage.removeItem("hourglass.key"); $("#key").value = ""; });
  $("#queue-select").addEventListener("change", (e) => { state.queue = e.target.value; if (state.view !== "queues") show(state.view); });
  document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => show(b.dataset.view)));
  $("#add-queue-form").addEventListener("submit", (e) => {
    e.preventDefault();
    guarded(async () => {
      const name = $("#add-queue-name").value.trim();
      state.queue = name;
      $("#add-queue-name").value = "";
      const names = await loadQueues();
      if (names && !names.includes(name)) throw new Error(`queue ${name} does not exist`);
    });
  });
  $("#refresh-queues").addEventListener("click", () => guarded(loadQueues));
  $("#filter-form").addEventListener("submit", (e) => { e.preventDefault(); guarded(() => listMessages(false)); });
  $("#more").addEventListener("click", () => guarded(() => listMessages(true)));
  $("#find-message").addEventListener("click", () => guarded(() => openTimeline(state.queue, $("#message-id").value.trim())));
  document.querySelectorAll(".select-all").forEach((all) => all.addEventListener("change", () => {
    all.closest("table").querySelectorAll("input.pick").forEach((box) => { box.checked = all.checked; });
  }));
  $("#cancel-selected").addEventListener("click", () => guarded(async () => {
    await eachMessage(picked("#messages-table"), "cancelled", (id) => api("DELETE", `${queuePath(state.queue)}/messages/${enc(id)}`));
    const text = $("#notice").textContent;
    await listMessages(false);
    notice(text);
  }));
  $("#redeliver-selected").addEventListener("click", () => guarded(async () => {
    await eachMessage(picked("#failed-table"), "redelivered", (id) => api("POST", `${queuePath(state.queue)}/messages/${enc(id)}/redeliver`));
    const text = $("#notice").textContent;
    await loadFailed();
    notice(text, /—/.test(text));
  }));
  $("#redeliver-all").addEventListener("click", () => guarded(async () => {
    const op = await runOperation({ action: "redeliver", filter: { status: "failed" } });
    await loadFailed();
    notice(operationText(op), op.status !== "succeeded");
  }));
  $("#operation-form").addEventListener("submit", (e) => { e.preventDefault(); guarded(startOperation); });
  $("#schedule-form").addEventListener("submit", (e) => { e.preventDefault(); guarded(saveSchedule); });
  $("#cancel-message").addEventListener("click", () => guarded(async () => {
    const { queue, id } = $("#timeline").dataset;
    await api("DELETE", `${queuePath(queue)}/messages/${enc(id)}`);
    await openTimeline(queue, id);
  }));
  $("#redeliver-message").addEventListener("click", () => guarded(async () => {
    const { queue, id } = $("#timeline").dataset;
    await api("POST", `${queuePath(queue)}/messages/${enc(id)}/redeliver`);
    await openTimeline(queue, id);
  }));
  $("#close-timeline").addEventListener("click", () => { $("#timeline").hidden = true; });
  show("queues");
}

document.addEventListener("DOMContentLoaded", wire);
