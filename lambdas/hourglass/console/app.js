// Hourglass console: a static page over the REST API. The key stays in sessionStorage (this tab only);
// every value from the API is written with textContent, never as HTML.
"use strict";

const STATUSES = ["pending", "delivering", "delivered", "failed", "cancelled", "expired"];
const COUNT_CAP = 5000;
const SEARCH_CAP = 5000;
const REFRESH_MS = 5000;
const BASE = location.pathname.replace(/\/console\/?$/, "");
const $ = (selector) => document.querySelector(selector);

const state = {
  queue: null, cursor: null, view: "queues", status: "", range: "hour",
  queues: {}, editing: null, editingSchedule: null, autoRefresh: true, refreshing: false, serverOrder: true,
};

// The notice belongs to the view that wrote it: switching views clears it, and a loader whose view is
// no longer shown writes nothing.
function notice(text, isError) {
  const el = $("#notice");
  el.textContent = text || "";
  el.className = isError ? "error" : "";
  el.dataset.view = state.view;
}

// What a view's loader says about its result: never hides an error that a later action showed, and
// says nothing while auto-refreshing (a refresh must not replace what the last action reported).
function info(text, view) {
  if (state.refreshing || (view && view !== state.view)) return;
  if (!$("#notice").classList.contains("error")) notice(text);
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
    this.detail = message;
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
  let doc = null;
  try {
    doc = text ? JSON.parse(text) : null;
  } catch (error) {
    doc = null;
  }
  if (!response.ok) {
    const error = (doc && doc.error) || {};
    throw new ApiError(response.status, error.code || "http_error", error.message || text);
  }
  return doc;
}

const enc = encodeURIComponent;
const queuePath = (queue) => `/v1/queues/${enc(queue)}`;
const messagePath = (queue, id) => `${queuePath(queue)}/messages/${enc(id)}`;
// A flow key of an ordered queue (v1.3), percent-encoded whole ("/" too); messages without one share the key "".
const keyPath = (queue, key) => `${queuePath(queue)}/keys/${enc(key)}`;
const noRoute = (error) => error.status === 404 && /no route/.test(error.message);

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

// `in 5 min`, `3 h ago`: how far a time is from now, rounded to the unit that reads best.
function relative(iso, now = Date.now()) {
  const seconds = (Date.parse(iso) - now) / 1000;
  const far = Math.abs(seconds);
  if (far < 1) return "now";
  // Each unit until the next reads better (rounded first: 59.6 min is "1 h"); hours up to two days.
  const [seconds_, minutes, hours] = [far, far / 60, far / 3600].map(Math.round);
  const amount = seconds_ < 60 ? `${seconds_} s` : minutes < 60 ? `${minutes} min` : hours < 48 ? `${hours} h` : `${Math.round(far / 86400)} d`;
  return seconds > 0 ? `in ${amount}` : `${amount} ago`;
}
const whenRelative = (iso) => (iso ? `${when(iso)} (${relative(iso)})` : "");

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

// Without `counts` in the queue document (an API before v1.2), a status is counted by paging its list.
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

async function queueCounts(name, doc) {
  const known = doc || state.queues[name];
  if (known && known.counts) return Object.fromEntries(STATUSES.map((s) => [s, String(known.counts[s] ?? 0)]));
  const counted = await Promise.all(STATUSES.map((s) => countStatus(name, s)));
  return Object.fromEntries(STATUSES.map((s, i) => [s, counted[i]]));
}

function fillQueueSelect(names) {
  const select = $("#queue-select");
  select.replaceChildren(...names.map((name) => new Option(name, name)));
  if (names.length && !names.includes(state.queue)) state.queue = names[0];
  select.value = state.queue || "";
}

// Where a target sends: its URL, queue URL or ARN.
function targetText(target) {
  if (!target) return "";
  return target.url || target.queue_url || Object.entries(target).find(([k]) => k.endsWith("_arn"))?.[1] || "";
}

function queueRow(queue, counted) {
  const name = queue.name;
  const row = document.createElement("tr");
  row.dataset.queue = name;
  cell(row, name, "mono name");
  cell(row, targetText(queue.target), "target");
  const limits = ["rate_limit", "max_concurrency", "timeout"]
    .filter((k) => queue[k] !== undefined && queue[k] !== null).map((k) => `${k}=${queue[k]}`);
  const retry = queue.retry || {};
  limits.push(`retry ${retry.max_attempts}x`);
  if (queue.flow_control) limits.push(`per flow_key ${flowText(queue.flow_control)}`);
  if (queue.window) limits.push(`window ${windowText(queue.window)}`);
  if (queue.circuit_breaker) limits.push(`breaker ${breakerText(queue.circuit_breaker)}`);
  if (queue.ordering) limits.push(orderingText(queue.ordering));
  cell(row, limits.join(", "), "limits");
  const paused = queue.paused_reason ? `paused (${queue.paused_reason})` : "paused";
  const stateClass = queue.paused ? `status-failed${queue.paused_reason ? " tripped" : ""}` : "status-delivered";
  cell(row, queue.paused ? paused : "active", `state ${stateClass}`);
  STATUSES.forEach((s) => cell(row, counted ? counted[s] : "…", `count count-${s}`));
  const actions = document.createElement("td");
  actions.className = "actions";
  actions.append(
    button("Messages", "open", () => { selectQueue(name); show("messages"); }),
    button("Edit", "edit-queue", () => editQueue(name)),
    button(queue.paused ? "Resume" : "Pause", "pause-toggle", () => guarded(() => pauseOrResume(queue))),
    button("Delete…", "delete-queue danger", () => guarded(() => deleteQueue(name))),
  );
  row.appendChild(actions);
  return row;
}

async function pauseOrResume(queue) {
  await api("POST", `${queuePath(queue.name)}/${queue.paused ? "resume" : "pause"}`);
  await loadQueues();
  notice(`queue ${queue.name} ${queue.paused ? "resumed" : "paused"}`);
}

// Queues that paused themselves, above the table: why, and a Resume (which starts a fresh window).
function showTripped(queues) {
  const tripped = queues.filter((q) => q.paused && q.paused_reason);
  const lines = tripped.map((q) => {
    const line = document.createElement("p");
    line.dataset.queue = q.name;
    const why = q.paused_reason === "circuit_breaker" && q.circuit_breaker
      ? `at least ${percent(q.circuit_breaker.failure_ratio)} of its attempts in ${q.circuit_breaker.window} s ` +
        `(${q.circuit_breaker.min_attempts} or more) failed or were retried.`
      : `${q.paused_reason}.`;
    const name = document.createElement("strong");
    name.textContent = q.name;
    const text = document.createElement("span");
    text.className = "reason";
    text.textContent = `paused itself (${q.paused_reason}): ${why} Fix the target, then resume it: counting starts afresh.`;
    line.append(name, text, button("Resume", "resume-tripped", () => guarded(() => pauseOrResume(q))));
    return line;
  });
  $("#tripped").replaceChildren(...lines);
  $("#tripped").hidden = !lines.length;
}

async function fillCounts(row, stillWanted) {
  const counts = await queueCounts(row.dataset.queue);
  if (!stillWanted()) return;
  STATUSES.forEach((s) => { row.querySelector(`td.count-${s}`).textContent = counts[s]; });
  row.dataset.counted = "true";
}

async function loadQueues() {
  const latest = newRun("queues");
  const stillWanted = () => latest() && state.view === "queues";
  // Only rows counted by the latest run carry data-counted (what the browser tests wait for); a row
  // shows its last counts until counted again (no flicker on auto-refresh).
  const shown = {};
  document.querySelectorAll("#queues-table tbody tr").forEach((r) => {
    delete r.dataset.counted;
    shown[r.dataset.queue] = Object.fromEntries(STATUSES.map((s) => [s, r.querySelector(`td.count-${s}`).textContent]));
  });
  const queues = await allQueues();
  if (!latest()) return;
  state.queues = Object.fromEntries(queues.map((q) => [q.name, q]));
  fillQueueSelect(queues.map((q) => q.name));
  showTripped(queues);
  const rows = queues.map((q) => queueRow(q, shown[q.name]));
  $("#queues-table tbody").replaceChildren(...rows);
  if (!queues.length) info("No queues yet: create one with New queue…", "queues");
  // Counts cost one listing per status without `counts`: the selected queue first, then a few at a time.
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

// --- queue form ---------------------------------------------------------------------------------

const FORM_NUMBERS = {
  "#qf-max-attempts": ["retry", "max_attempts"], "#qf-backoff-base": ["retry", "backoff_base"],
  "#qf-backoff-max": ["retry", "backoff_max"], "#qf-rate-limit": [null, "rate_limit"],
  "#qf-max-concurrency": [null, "max_concurrency"], "#qf-timeout": [null, "timeout"],
  "#qf-key-rate-limit": ["flow_control", "key_rate_limit"], "#qf-key-max-concurrency": ["flow_control", "key_max_concurrency"],
};

// The API's bounds of the fields the console checks before saving (tests/clients/test_console_files.py
// keeps them equal to the API's own).
const BOUNDS = {
  "retry.max_attempts": { low: 1, high: 100, integer: true },
  "retry.backoff_base": { low: 0, high: 86400, integer: false },
  "retry.backoff_max": { low: 0, high: 2592000, integer: false },
  rate_limit: { low: 0.1, high: 10000, integer: false },
  max_concurrency: { low: 1, high: 1000, integer: true },
  timeout: { low: 1, high: 120, integer: false },
  "flow_control.key_rate_limit": { low: 0.1, high: 10000, integer: false },
  "flow_control.key_max_concurrency": { low: 1, high: 1000, integer: true },
  "circuit_breaker.failure_ratio": { low: 0.01, high: 1, integer: false },
  "circuit_breaker.min_attempts": { low: 1, high: 100000, integer: true },
  "circuit_breaker.window": { low: 10, high: 86400, integer: true },
  jitter: { low: 0, high: 3600, integer: true },
};
// The target types the queue form edits ("" is none); another kind is kept as it is.
const FORM_TARGETS = ["http", "sqs", ""];
const BREAKER_FIELDS = { "#qf-breaker-ratio": "failure_ratio", "#qf-breaker-min-attempts": "min_attempts", "#qf-breaker-window": "window" };
const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const NAME_RULE = "must be 1 to 64 letters, digits, hyphens (-) or underscores (_), with no spaces";
const WEB_ADDRESS = /^https?:\/\/[^\s/]+\S*$/;

// The words of a field: its label's own text (`Max attempts`), without the input's.
function fieldName(input) {
  if (input.closest(".days")) return "Days";
  const label = input.closest("label");
  if (!label) return input.getAttribute("aria-label") || input.id;
  return [...label.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent).join("").trim();
}

// What the API says of a field, with a pattern said in words.
function inWords(text) {
  return text.replace(/must match \^\[A-Za-z0-9_-\]\{1,64\}\$/, NAME_RULE).replace(/must match \S+/, "is not in the expected form");
}

// A form's problems, each on its input: every one is found before saving, and all are shown at once.
class Problems {
  constructor() {
    this.found = [];
  }

  add(selector, text) {
    if (!this.found.some(([known]) => known === selector)) this.found.push([selector, text]);
  }

  // A number field's value within the API's bounds of `field`; null when empty or refused.
  number(selector, field) {
    const input = $(selector);
    const raw = input.value.trim();
    if (input.validity.badInput) return this.add(selector, "is not a number") || null;
    if (raw === "") return null;
    const value = Number(raw);
    const { low, high, integer } = BOUNDS[field];
    const inside = Number.isFinite(value) && value >= low && value <= high;
    if (integer && !(inside && Number.isInteger(value))) return this.add(selector, `must be a whole number from ${low} to ${high}`) || null;
    if (!inside) return this.add(selector, `must be a number from ${low} to ${high}`) || null;
    return value;
  }

  url(selector, { required }) {
    const value = $(selector).value.trim();
    if (!value && required) this.add(selector, "is needed for this target type");
    else if (value && !WEB_ADDRESS.test(value)) this.add(selector, "must be a web address starting with http:// or https://");
    return value;
  }

  name(selector) {
    const value = $(selector).value.trim();
    if (!value) this.add(selector, "is needed");
    else if (!NAME.test(value)) this.add(selector, NAME_RULE);
    return value;
  }

  check() {
    if (this.found.length) throw new FormError(this.found);
  }
}

class FormError extends Error {
  constructor(found) {
    // The notice names them; each line under the form says what is wrong with it.
    const names = found.map(([selector]) => fieldName($(selector)));
    super(found.length === 1 ? `Not saved: ${names[0]} ${found[0][1]}.` : `Not saved: ${found.length} fields need a fix: ${names.join(", ")}.`);
    this.found = found;
  }
}

function clearProblems(form, errors) {
  form.querySelectorAll(".invalid").forEach((input) => {
    input.classList.remove("invalid");
    input.removeAttribute("aria-invalid");
    input.removeAttribute("title");
  });
  errors.replaceChildren();
}

// Each problem beside the form as a line naming its field, and on the field itself (red, its title).
function showProblems(form, errors, found) {
  clearProblems(form, errors);
  const list = document.createElement("ul");
  for (const [selector, text] of found) {
    const input = $(selector);
    input.classList.add("invalid");
    input.setAttribute("aria-invalid", "true");
    input.title = text;
    const item = document.createElement("li");
    item.dataset.field = selector.slice(1);
    item.textContent = `${fieldName(input)}: ${text}`;
    list.appendChild(item);
  }
  errors.appendChild(list);
  $(found[0][0]).focus();
}

// The input a field named in the API's 400 is typed in (`window.days[2]` is the window's days).
function inputOf(inputs, field) {
  const plain = field.replace(/\[\d+\]/g, "");
  return inputs[plain] || inputs[plain.split(".")[0]] || null;
}

// A save refused before sending, or by the API naming one field: shown on the form; anything else
// is the notice's alone.
function formFailure(form, errors, inputs, error) {
  if (error instanceof FormError) return showProblems(form, errors, error.found);
  const named = error instanceof ApiError && error.status === 400 && /^([\w.[\]]+): (.*)$/s.exec(error.detail || "");
  const input = named && inputOf(inputs, named[1]);
  if (input) return showProblems(form, errors, [[input, inWords(named[2])]]);
  const line = document.createElement("p");
  line.textContent = error.message;
  errors.replaceChildren(line);
}

// Where the queue form's fields are, by the API's names of them.
const QUEUE_INPUTS = {
  queue: "#qf-name", target: "#qf-target-url", "target.url": "#qf-target-url", "target.queue_url": "#qf-target-url",
  failure_destination: "#qf-failure-url", signing_secret: "#qf-secret", window: "#qf-window-timezone",
  "window.timezone": "#qf-window-timezone", "window.from": "#qf-window-from", "window.to": "#qf-window-to",
  "window.days": 'input[name="qf-window-day"]', "window.exclude_dates": "#qf-window-exclude",
  ordering: "#qf-ordering", "ordering.by": "#qf-ordering", "ordering.on_failure": "#qf-ordering-on-failure",
  ...Object.fromEntries(Object.entries(FORM_NUMBERS).map(([selector, [group, key]]) => [group ? `${group}.${key}` : key, selector])),
  ...Object.fromEntries(Object.entries(BREAKER_FIELDS).map(([selector, key]) => [`circuit_breaker.${key}`, selector])),
};
const SCHEDULE_INPUTS = {
  name: "#schedule-name", cron: "#schedule-when", every: "#schedule-when", timezone: "#schedule-timezone",
  body: "#schedule-body", target: "#schedule-target-url", catch_up: "#schedule-catch-up", jitter: "#schedule-jitter",
  window: "#sf-window-timezone", "window.timezone": "#sf-window-timezone", "window.from": "#sf-window-from",
  "window.to": "#sf-window-to", "window.days": 'input[name="sf-window-day"]', "window.exclude_dates": "#sf-window-exclude",
};

// The form's circuit breaker; none when its three fields are empty (an empty one takes the API's default).
function breakerFormDoc(problems) {
  const doc = {};
  for (const [selector, key] of Object.entries(BREAKER_FIELDS)) {
    const value = problems.number(selector, `circuit_breaker.${key}`);
    if (value !== null) doc[key] = value;
  }
  return Object.keys(doc).length ? doc : null;
}

// `key_rate_limit=2, key_max_concurrency=1`: the limits each flow_key has of its own.
function flowText(flow) {
  return Object.entries(flow).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => `${k}=${v}`).join(", ");
}

// `ordered by flow_key, hold on failure`: a queue's ordering in a few words.
function orderingText(ordering) {
  return `ordered by ${ordering.by}` + (ordering.on_failure === "hold" ? ", hold on failure" : "");
}

// The on-failure choice means something only with an order.
function syncOrderingForm() {
  $("#qf-ordering-on-failure").disabled = !$("#qf-ordering").value;
}

const percent = (ratio) => `${+(ratio * 100).toPrecision(3)}%`;

// `pauses at ≥50% failed of ≥20 attempts in 300 s`: when a breaker pauses its queue.
function breakerText(breaker) {
  return `pauses at ≥${percent(breaker.failure_ratio)} failed of ≥${breaker.min_attempts} attempts in ${breaker.window} s`;
}

function openQueueForm(queue) {
  const form = $("#queue-form");
  form.reset();
  clearProblems(form, $("#qf-error"));
  form.hidden = false;
  // The form is above the table: a row far down would otherwise open it out of sight.
  form.scrollIntoView({ block: "start" });
  $("#qf-target-type").querySelectorAll("option").forEach((o) => { if (!FORM_TARGETS.includes(o.value)) o.remove(); });
  $("#qf-target-url").readOnly = false;
  state.editing = queue ? queue.name : null;
  $("#queue-form-title").textContent = queue ? `Edit queue ${queue.name}` : "New queue";
  $("#qf-name").value = queue ? queue.name : "";
  $("#qf-name").readOnly = Boolean(queue);
  $("#qf-secret-note").hidden = !(queue && queue.signing_secret_set);
  $("#qf-ordering").value = queue && queue.ordering ? queue.ordering.by : "";
  $("#qf-ordering-on-failure").value = (queue && queue.ordering && queue.ordering.on_failure) || "continue";
  syncOrderingForm();
  if (!queue) return $("#qf-name").focus({ preventScroll: true });
  const target = queue.target;
  // A target the form cannot edit (Lambda, SNS, ...) is shown and kept as it is.
  if (target && !FORM_TARGETS.includes(target.type)) {
    $("#qf-target-type").append(new Option(`${target.type} (kept as is)`, target.type));
    $("#qf-target-url").readOnly = true;
  }
  $("#qf-target-type").value = target ? target.type : "";
  $("#qf-target-url").value = targetText(target);
  for (const [selector, [group, key]] of Object.entries(FORM_NUMBERS)) {
    const value = group ? (queue[group] || {})[key] : queue[key];
    $(selector).value = value === null || value === undefined ? "" : String(value);
  }
  $("#qf-failure-url").value = targetText(queue.failure_destination);
  for (const [selector, key] of Object.entries(BREAKER_FIELDS)) {
    $(selector).value = queue.circuit_breaker ? String(queue.circuit_breaker[key]) : "";
  }
  fillWindowForm("qf", queue.window);
  $("#qf-secret").placeholder = queue.signing_secret_set ? "set: leave empty to keep it" : "none";
  $("#qf-target-url").focus({ preventScroll: true });
}

const WINDOW_DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

// The window fields of a form: `qf` (queue) or `sf` (schedule).
function fillWindowForm(prefix, window) {
  $(`#${prefix}-window-timezone`).value = window ? window.timezone : "";
  $(`#${prefix}-window-from`).value = window ? window.from : "";
  $(`#${prefix}-window-to`).value = window ? window.to : "";
  $(`#${prefix}-window-exclude`).value = window ? window.exclude_dates.join(", ") : "";
  document.querySelectorAll(`input[name="${prefix}-window-day"]`).forEach((box) => {
    box.checked = !window || window.days.includes(box.value);
  });
}

const HH_MM = /^([01][0-9]|2[0-3]):[0-5][0-9]$/;
const DATE = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$/;

// A time zone field's verdict: null when empty, else whether the browser knows the zone.
const timezoneOf = (selector) => ($(selector).value.trim() ? isTimeZone($(selector).value.trim()) : null);

function isTimeZone(name) {
  try {
    new Intl.DateTimeFormat("en", { timeZone: name });
    return true;
  } catch (error) {
    return false;
  }
}

// The form's window as the API takes it; none when From, To and the time zone are all empty.
function windowFormDoc(prefix, problems) {
  const timezone = $(`#${prefix}-window-timezone`).value.trim();
  const from = $(`#${prefix}-window-from`).value.trim();
  const to = $(`#${prefix}-window-to`).value.trim();
  if (!timezone && !from && !to) return null;
  const days = [...document.querySelectorAll(`input[name="${prefix}-window-day"]:checked`)].map((box) => box.value);
  const excluded = $(`#${prefix}-window-exclude`).value.split(/[\s,]+/).filter(Boolean);
  if (timezone && !isTimeZone(timezone)) problems.add(`#${prefix}-window-timezone`, "is not a time zone (such as Europe/Paris or UTC)");
  for (const [key, value] of [["from", from], ["to", to]]) {
    if (!HH_MM.test(value)) problems.add(`#${prefix}-window-${key}`, value ? "must be a 24-hour time such as 09:00" : "is needed for a window");
  }
  if (!days.length) problems.add(`input[name="${prefix}-window-day"]`, "pick at least one day");
  if (excluded.some((date) => !DATE.test(date))) problems.add(`#${prefix}-window-exclude`, "must be dates such as 2026-12-25, separated by commas");
  return { timezone: timezone || "UTC", days, from, to, ...(excluded.length ? { exclude_dates: excluded } : {}) };
}

// `09:00–18:00 Europe/Paris mon–fri, not 2026-12-25`: a window in one line.
function windowText(window) {
  if (!window) return "";
  const days = window.days.length === 7 ? "every day"
    : WINDOW_DAYS.join().includes(window.days.join()) && window.days.length > 2
      ? `${window.days[0]}–${window.days[window.days.length - 1]}` : window.days.join(" ");
  const excluded = window.exclude_dates.length ? `, not ${window.exclude_dates.join(" ")}` : "";
  return `${window.from}–${window.to} ${window.timezone} ${days}${excluded}`;
}

function editQueue(name) {
  const queue = state.queues[name];
  if (queue) openQueueForm(queue);
}

function placeOf(url) {
  return /^https:\/\/sqs\.[^/]+\.amazonaws\.com\//.test(url) || /\/\d{12}\/[^/]+$/.test(url)
    ? { type: "sqs", queue_url: url }
    : { type: "http", url };
}

// The queue's document as PUT replaces it: the form's fields, and what the form does not show (target
// headers, a target of another kind, delays, ttl) carried over from the queue being edited; the secrets
// are left out unless changed, so the queue keeps them. Every bad field is in `problems`.
function queueFormDoc(problems) {
  const existing = state.editing ? state.queues[state.editing] || {} : {};
  const doc = {};
  for (const key of ["default_delay", "max_delay", "ttl"]) {
    if (existing[key] !== undefined && existing[key] !== null) doc[key] = existing[key];
  }
  const type = $("#qf-target-type").value;
  const url = FORM_TARGETS.includes(type) ? problems.url("#qf-target-url", { required: type !== "" }) : "";
  if (type === "http") doc.target = { type, url, ...(existing.target && existing.target.headers ? { headers: existing.target.headers } : {}) };
  if (type === "sqs") doc.target = { type, queue_url: url };
  if (!FORM_TARGETS.includes(type)) doc.target = existing.target;
  for (const [selector, [group, key]] of Object.entries(FORM_NUMBERS)) {
    const value = problems.number(selector, group ? `${group}.${key}` : key);
    if (value === null) continue;
    if (group) doc[group] = { ...(doc[group] || {}), [key]: value };
    else doc[key] = value;
  }
  const failure = problems.url("#qf-failure-url", { required: false });
  if (failure) doc.failure_destination = placeOf(failure);
  const breaker = breakerFormDoc(problems);
  if (breaker) doc.circuit_breaker = breaker;
  const window = windowFormDoc("qf", problems);
  if (window) doc.window = window;
  const by = $("#qf-ordering").value;
  if (by) doc.ordering = { by, on_failure: $("#qf-ordering-on-failure").value };
  // A PUT without the secret keeps the queue's (the API never returns it): only a typed one or the
  // remove box changes it.
  const secret = $("#qf-secret").value;
  const remove = $("#qf-remove-secret").checked;
  if (secret && remove) problems.add("#qf-secret", "type a new secret or tick \u201cremove the secret\u201d, not both");
  if (secret) doc.signing_secret = secret;
  else if (remove) doc.signing_secret = null;
  return doc;
}

async function saveQueue() {
  const problems = new Problems();
  const name = state.editing || problems.name("#qf-name");
  const doc = queueFormDoc(problems);
  problems.check();
  const saved = await api("PUT", queuePath(name), doc);
  state.queues[name] = saved;
  $("#queue-form").hidden = true;
  state.editing = null;
  selectQueue(name);
  await loadQueues();
  notice(`saved queue ${name}`);
}

async function deleteQueue(name) {
  const counts = await queueCounts(name, await api("GET", queuePath(name)));
  const pending = counts.pending;
  const what = `Delete queue ${name}? This cancels its ${pending} pending message(s)` +
    (counts.delivering !== "0" ? ` (and ${counts.delivering} being delivered may still arrive)` : "") +
    ", and its schedules stop. This cannot be undone.";
  if (!confirm(what)) return notice(`queue ${name} kept`);
  await api("DELETE", queuePath(name));
  if (state.queue === name) state.queue = null;
  await loadQueues();
  notice(`deleted queue ${name}: ${pending} pending message(s) cancelled`);
}

// --- messages -----------------------------------------------------------------------------------

// What a message's status allows: deliver now and cancel while it waits, redeliver once it ended.
const ALLOWED = {
  deliverNow: (m) => m.status === "pending",
  cancel: (m) => m.status === "pending",
  redeliver: (m) => ["delivered", "failed", "expired"].includes(m.status),
};

// A message's actions, from its row or its timeline: each then shows the message as it is now, and
// follows a delivery it started until its attempt ends.
const MESSAGE_ACTIONS = {
  deliverNow: { label: "Deliver now", className: "deliver-now", done: "delivering now:", call: (m) => deliverNow(m.queue, m.id), follow: true },
  cancel: { label: "Cancel", className: "cancel", done: "cancelled", call: (m) => cancelMessage(m.queue, m.id), follow: false },
  redeliver: { label: "Redeliver", className: "redeliver", done: "redelivered", call: (m) => api("POST", `${messagePath(m.queue, m.id)}/redeliver`), follow: true },
};

async function runMessageAction(kind, m) {
  const action = MESSAGE_ACTIONS[kind];
  await action.call(m);
  await showMessageNow(m.queue, m.id);
  await recount(m.queue);
  notice(`${action.done} ${m.id}`);
  if (action.follow) follow(m.queue, m.id);
}

// The status tabs' counts again, when they are shown for `queue`.
async function recount(queue) {
  if (state.view !== "messages" || state.queue !== queue) return;
  const counts = await tabCounts();
  if (state.view === "messages" && state.queue === queue) fillStatusTabs(counts);
}

function messageActions(m) {
  const td = document.createElement("td");
  td.className = "actions";
  for (const [kind, action] of Object.entries(MESSAGE_ACTIONS)) {
    if (ALLOWED[kind](m)) td.append(button(action.label, action.className, () => guarded(() => runMessageAction(kind, m))));
  }
  return td;
}

// When the console cancelled a message, for the timeline of one whose document has no `finished_at`
// (a server older than that field).
const CANCELLED_AT = "hourglass.cancelled_at";
function cancelledAt(queue, id) {
  return JSON.parse(sessionStorage.getItem(CANCELLED_AT) || "{}")[`${queue}/${id}`] || null;
}

async function cancelMessage(queue, id) {
  await api("DELETE", messagePath(queue, id));
  const known = JSON.parse(sessionStorage.getItem(CANCELLED_AT) || "{}");
  known[`${queue}/${id}`] = new Date().toISOString();
  sessionStorage.setItem(CANCELLED_AT, JSON.stringify(known));
}

// The message as it is now, wherever it is shown: its row in the tables (replaced, its tick kept)
// and the timeline when open on it. The status tabs' counts follow with the view's next load.
async function showMessageNow(queue, id) {
  const m = await api("GET", messagePath(queue, id));
  for (const table of ["#messages-table", "#failed-table"]) {
    const row = document.querySelector(`${table} tbody tr[data-id="${CSS.escape(id)}"]`);
    if (!row) continue;
    const ticked = row.querySelector("input.pick")?.checked;
    const fresh = messageRow(m, true);
    const box = fresh.querySelector("input.pick");
    if (box) box.checked = Boolean(ticked);
    row.replaceWith(fresh);
  }
  const timeline = $("#timeline");
  if (!timeline.hidden && timeline.dataset.queue === queue && timeline.dataset.id === id) await openTimeline(queue, id);
  return m;
}

const FOLLOW_MS = 700;
const FOLLOW_FOR_MS = 30000;
// Still on its way: being delivered, or pending and due by now (not waiting for a retry or a window).
const onItsWay = (m) => m.status === "delivering" || (m.status === "pending" && Date.parse(m.next_attempt_at || m.due_at) <= Date.now() + 2000);

// After Deliver now or Redeliver: the message is shown again until its attempt ends (or 30 s pass).
async function follow(queue, id) {
  const deadline = Date.now() + FOLLOW_FOR_MS;
  let m = null;
  do {
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_MS));
    try {
      m = await showMessageNow(queue, id);
    } catch (error) {
      return;  // gone (its queue deleted): the next load says so
    }
  } while (onItsWay(m) && Date.now() < deadline);
  await recount(queue).catch(() => {});
}

// `deliver-now` (v1.2), or the same change as `PATCH {"delay": 0}` where the API has no such route.
async function deliverNow(queue, id) {
  try {
    return await api("POST", `${messagePath(queue, id)}/deliver-now`);
  } catch (error) {
    if (!noRoute(error)) throw error;
    return api("PATCH", messagePath(queue, id), { delay: 0 });
  }
}

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
  // The time it was scheduled for and, when a retry or the delivery window moved it, the next attempt.
  const due = cell(row, "", "due mono");
  const line = (text, className) => {
    const div = document.createElement("div");
    div.className = className;
    div.textContent = text;
    due.appendChild(div);
  };
  line(whenRelative(m.due_at), "due-at");
  if (m.next_attempt_at) line(`next attempt ${whenRelative(m.next_attempt_at)}`, "next-attempt");
  if (m.blocked_by) line(`waits behind ${m.blocked_by}`, "blocked-by");
  cell(row, `${m.flow_key ?? "—"} · p${m.priority ?? 5}`, "mono");
  cell(row, m.attempts);
  cell(row, m.last_error || "", "error");
  cell(row, short(m.body), "body mono");
  row.appendChild(messageActions(m));
  return row;
}

// Every status together; "n+" when a status was counted only up to COUNT_CAP.
function total(counts) {
  const sum = STATUSES.reduce((n, s) => n + (parseInt(counts[s], 10) || 0), 0);
  return STATUSES.some((s) => String(counts[s]).endsWith("+")) ? `${sum}+` : String(sum);
}

function fillStatusTabs(counts) {
  const tabs = $("#status-tabs");
  const entries = [["", "all"], ...STATUSES.map((s) => [s, s])];
  tabs.replaceChildren(...entries.map(([status, label]) => {
    const count = counts ? ` (${status ? counts[status] : total(counts)})` : "";
    const tab = button(`${label}${count}`, `tab${status === state.status ? " active" : ""}`, () => {
      state.status = status;
      guarded(() => listMessages(false));
    });
    tab.dataset.status = status;
    tab.setAttribute("role", "tab");
    tab.setAttribute("aria-selected", String(status === state.status));
    return tab;
  }));
}

const byKey = { due: (m) => m.due_at || "", created: (m) => m.created_at || "" };

async function messagePage(params) {
  const order = $("#order").value;
  if (order && state.serverOrder) params.set("order", order);
  try {
    return await api("GET", `${queuePath(state.queue)}/messages?${params}`);
  } catch (error) {
    // An API before v1.2 refuses `order`: the page is then sorted here (within the page only).
    if (!(error.status === 400 && /order/.test(error.message)) || !params.has("order")) throw error;
    state.serverOrder = false;
    params.delete("order");
    return api("GET", `${queuePath(state.queue)}/messages?${params}`);
  }
}

async function listMessages(more) {
  if (!state.queue) return notice("Pick a queue first.", true);
  const params = new URLSearchParams({ limit: "50" });
  const schedule = $("#schedule-filter").value.trim();
  if (state.status) params.set("status", state.status);
  if (schedule) params.set("schedule", schedule);
  if (more && state.cursor) params.set("cursor", state.cursor);
  const latest = newRun("messages");
  const kept = new Set(picked("#messages-table"));
  const [page, counts] = await Promise.all([messagePage(params), tabCounts()]);
  if (!latest()) return;
  fillStatusTabs(counts);
  const order = $("#order").value;
  if (order && !state.serverOrder) page.messages.sort((a, b) => byKey[order](a).localeCompare(byKey[order](b)));
  const tbody = $("#messages-table tbody");
  if (!more) tbody.replaceChildren();
  page.messages.forEach((m) => tbody.appendChild(messageRow(m, true)));
  tbody.querySelectorAll("input.pick").forEach((box) => { box.checked = kept.has(box.value); });
  state.cursor = page.next_cursor;
  $("#more").hidden = !page.next_cursor;
  const sorted = order && !state.serverOrder ? " (sorted within each page: this API cannot order lists)" : "";
  info(`${tbody.children.length} message(s) shown${sorted}`, "messages");
}

async function tabCounts() {
  try {
    const doc = await api("GET", queuePath(state.queue));
    state.queues[state.queue] = doc;
    return await queueCounts(state.queue, doc);
  } catch (error) {
    return null;
  }
}

// An id opens the message; anything else is looked up as a dedup id (without a server-side lookup,
// by reading the queue's messages, at most SEARCH_CAP of them).
async function findMessage() {
  const wanted = $("#message-id").value.trim();
  if (!wanted) return;
  try {
    return await openTimeline(state.queue, wanted);
  } catch (error) {
    if (error.status !== 404 && error.status !== 400) throw error;
  }
  let cursor = null;
  let seen = 0;
  do {
    const query = "?limit=1000" + (cursor ? `&cursor=${enc(cursor)}` : "");
    const page = await api("GET", `${queuePath(state.queue)}/messages${query}`);
    const found = page.messages.find((m) => m.dedup_id === wanted);
    if (found) {
      await openTimeline(state.queue, found.id);
      return notice(`dedup id ${wanted} is message ${found.id}`);
    }
    seen += page.messages.length;
    cursor = page.next_cursor;
  } while (cursor && seen < SEARCH_CAP);
  const scope = cursor ? `the first ${seen} messages of ${state.queue}` : `${state.queue}`;
  notice(`no message has the id or dedup id ${wanted} in ${scope}`, true);
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
  return li;
}

function attemptEvent(list, a) {
  const code = a.status_code === null || a.status_code === undefined ? "" : ` HTTP ${a.status_code}`;
  const error = a.error && a.error !== `HTTP ${a.status_code}` ? ` — ${a.error}` : "";
  const retry = a.retry_at ? `, retry at ${when(a.retry_at)}` : "";
  const li = event(list, a.started_at, `attempt ${a.attempt}: ${a.outcome}${code}${error}${retry}`, `status-${a.outcome}`);
  li.className = "attempt";
  if (a.response_body) {
    const body = document.createElement("pre");
    body.className = "response mono";
    body.textContent = a.response_body;
    body.title = "the target's response body (first KiB)";
    li.appendChild(body);
  }
}

async function openTimeline(queue, id) {
  // The attempts first: an attempt that ends between the two reads then shows in the status, never as
  // an attempt of a message still said to be pending.
  let attempts = null;
  try {
    attempts = (await api("GET", `${messagePath(queue, id)}/attempts`)).attempts;
  } catch (error) {
    if (!noRoute(error)) throw error;
  }
  const m = await api("GET", messagePath(queue, id));
  $("#timeline").hidden = false;
  $("#timeline").dataset.queue = queue;
  $("#timeline").dataset.id = id;
  $("#timeline-id").textContent = id;
  const doc = $("#timeline-doc");
  doc.replaceChildren();
  for (const key of ["queue", "status", "due_at", "next_attempt_at", "window", "expires_at", "attempts", "dedup_id", "flow_key", "blocked_by", "priority", "last_error"]) {
    if (key === "window" && !m.window) continue;  // only a message's own window (its queue's is on the queue)
    if (key === "blocked_by" && !m.blocked_by) continue;  // only while it waits behind another of its key
    const dt = document.createElement("dt");
    dt.textContent = key;
    const dd = document.createElement("dd");
    if (key === "blocked_by") dd.append(messageLink(queue, m.blocked_by));
    else dd.textContent = key === "window" ? windowText(m.window) : m[key] === null || m[key] === undefined ? "—" : String(m[key]);
    dd.dataset.key = key;
    if (key === "window") dd.className = "window";
    if (key === "status") dd.className = `status-${m.status}`;
    doc.append(dt, dd);
  }
  const list = $("#timeline-events");
  list.replaceChildren();
  event(list, m.created_at, "created");
  event(list, m.due_at, dueText(m));
  if (m.next_attempt_at) {
    const why = m.attempts ? "after a retry's backoff, or at the delivery window's next opening" : "the delivery window's next opening";
    event(list, m.next_attempt_at, `next attempt (${why})`);
  }
  if (attempts) {
    attempts.forEach((a) => attemptEvent(list, a));
  } else if (m.attempts) {
    event(list, null, `${m.attempts} attempt(s)` + (m.last_error ? `, last error: ${m.last_error}` : ""));
  }
  if (m.status === "delivered") event(list, m.finished_at || m.delivered_at, "delivered", "status-delivered");
  if (["failed", "expired"].includes(m.status)) event(list, m.finished_at || null, m.status, `status-${m.status}`);
  if (m.status === "cancelled") {
    // The API says when (`finished_at`), but not for a message cancelled before it kept that time: then the
    // time this console cancelled it, if it did.
    const mine = m.finished_at ? null : cancelledAt(queue, id);
    const text = m.finished_at ? "cancelled" : mine ? "cancelled (from this console)" : "cancelled (the API does not say when)";
    event(list, m.finished_at || mine, text, "status-cancelled");
  }
  // Only the actions its status allows are offered.
  for (const [kind, selector] of Object.entries(TIMELINE_BUTTONS)) {
    $(selector).disabled = !ALLOWED[kind](m);
    $(selector).hidden = !ALLOWED[kind](m);
  }
  $("#timeline").dataset.status = m.status;
  await fillTimelineKey(queue, m);
}

// --- flow keys of an ordered queue (v1.3) ---------------------------------------------------------

// A message id that opens its timeline.
function messageLink(queue, id) {
  const link = button(id, "link mono open-message", () => guarded(() => openTimeline(queue, id)));
  link.dataset.id = id;
  return link;
}

// The queue's `ordering` (its document read once when not known yet); null for a queue without one.
async function orderingOf(queue) {
  if (!state.queues[queue]) state.queues[queue] = await api("GET", queuePath(queue));
  return state.queues[queue].ordering || null;
}

// A key's state in a line: its head (a link to it), how many wait, held or not, and Release when held.
function keyState(queue, key) {
  const line = document.createElement("div");
  line.className = "key-state";
  line.dataset.key = key.flow_key;
  const part = (className, ...content) => {
    const span = document.createElement("span");
    span.className = className;
    span.append(...content);
    line.appendChild(span);
  };
  part("key-name mono", `key ${JSON.stringify(key.flow_key)}`);
  part("key-head", "head ", key.head ? messageLink(queue, key.head) : "none");
  part("key-waiting", `${key.waiting} waiting`);
  part(`key-held${key.held ? " held" : ""}`, key.held ? "held after a failure" : "not held");
  if (key.held) line.appendChild(button("Release", "release-key", () => guarded(() => releaseKey(queue, key.flow_key))));
  return line;
}

// On an ordered queue, the timeline shows its message's key (one without a flow_key is in the key "").
async function fillTimelineKey(queue, m) {
  const box = $("#timeline-key");
  const key = m.flow_key ?? "";
  let doc = null;
  if (await orderingOf(queue)) {
    try {
      doc = await api("GET", keyPath(queue, key));
    } catch (error) {
      if (error.status !== 404) throw error;
    }
  }
  box.replaceChildren(...(doc ? [keyState(queue, doc)] : []));
  box.hidden = !doc;
}

// The key view of the messages tab: one key, looked up by name.
async function showKey(queue, key) {
  const doc = await api("GET", keyPath(queue, key));
  const view = $("#key-view");
  view.dataset.queue = queue;
  view.dataset.key = key;
  $("#key-view-name").textContent = JSON.stringify(key);
  $("#key-view-state").replaceChildren(keyState(queue, doc));
  view.hidden = false;
}

// Release, then everything that shows the key or its messages as they are now.
async function releaseKey(queue, key) {
  await api("POST", `${keyPath(queue, key)}/release`);
  const view = $("#key-view");
  if (!view.hidden && view.dataset.queue === queue && view.dataset.key === key) await showKey(queue, key);
  const timeline = $("#timeline");
  if (!timeline.hidden && timeline.dataset.queue === queue) await openTimeline(queue, timeline.dataset.id);
  if (state.view === "messages" && state.queue === queue) await listMessages(false);
  notice(`released flow key ${JSON.stringify(key)} of ${queue}`);
}

const TIMELINE_BUTTONS = { deliverNow: "#deliver-now-message", cancel: "#cancel-message", redeliver: "#redeliver-message" };

// The due entry as true as the message says: a sweep hands a message to the timer queue shortly before
// it is due, so one still waiting has not been handed off yet, and one that ended says only when.
function dueText(m) {
  if (m.status !== "pending") return "due";
  if (m.blocked_by) return `due (waiting behind ${m.blocked_by}, the message before it in its flow key)`;
  if (Date.parse(m.due_at) > Date.now()) return `due ${relative(m.due_at)} (waiting: a sweep hands it to the timer queue shortly before)`;
  return m.next_attempt_at ? "due (its next attempt is below)" : "due (being handed to a dispatcher)";
}

// --- failed, schedules, lateness ----------------------------------------------------------------

async function loadFailed() {
  if (!state.queue) return;
  const latest = newRun("failed");
  const kept = new Set(picked("#failed-table"));
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
  $("#failed-table tbody").querySelectorAll("input.pick").forEach((box) => { box.checked = kept.has(box.value); });
  info(`${rows.length} failed or expired message(s)`, "failed");
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
  if (!tbody.children.length) info("No schedules on this queue.", "schedules");
}

function scheduleRow(s) {
  const row = document.createElement("tr");
  row.dataset.schedule = s.name;
  cell(row, s.name, "mono");
  cell(row, s.cron ? s.cron : `every ${s.every} s`, "mono when");
  cell(row, s.timezone || "UTC");
  cell(row, s.paused ? "paused" : "active");
  // Each time whole on its line (a time cut inside its date reads wrong).
  const next = cell(row, "", "mono next");
  (s.next_due_at || []).forEach((at, i) => {
    const time = document.createElement("span");
    time.textContent = when(at);
    next.append(...(i ? [", "] : []), time);
  });
  cell(row, `${s.catch_up || "skip"} · ${s.jitter ? `up to ${s.jitter} s` : "none"}`, "policy");
  const place = [s.window ? windowText(s.window) : "queue's window", s.target ? `to ${targetText(s.target)}` : ""];
  const placeCell = cell(row, place.filter(Boolean).join(" · "), "window");
  if (s.window) {
    // next_due_at is when each occurrence is due: one due outside the window is delivered at its opening.
    const hint = document.createElement("div");
    hint.className = "hint";
    hint.textContent = "an occurrence due outside it waits for its next opening";
    placeCell.appendChild(hint);
  }
  cell(row, short(s.body), "body mono");
  row.appendChild(scheduleActions(s));
  return row;
}

function scheduleActions(s) {
  const path = `${queuePath(state.queue)}/schedules/${enc(s.name)}`;
  const actions = document.createElement("td");
  actions.className = "actions";
  actions.append(
    button("Edit", "schedule-edit", () => openScheduleForm(s)),
    button(s.paused ? "Resume" : "Pause", "schedule-toggle", () => guarded(async () => {
      await api("POST", `${path}/${s.paused ? "resume" : "pause"}`);
      await loadSchedules();
      notice(`schedule ${s.name} ${s.paused ? "resumed" : "paused"}`);
    })),
    button("Occurrences", "schedule-messages", () => {
      $("#schedule-filter").value = s.name;
      state.status = "";
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

// What a schedule's PUT carries over from the schedule being edited (the form does not show them).
const SCHEDULE_KEPT = ["start_at", "end_at", "flow_key", "priority"];

// The schedule form empty (a new schedule), or filled with `s` to edit it.
function openScheduleForm(s) {
  $("#schedule-form").reset();
  clearProblems($("#schedule-form"), $("#sf-error"));
  state.editingSchedule = s;
  $("#schedule-form-title").textContent = s ? `Edit schedule ${s.name}` : "New schedule";
  $("#schedule-name").readOnly = Boolean(s);
  fillWindowForm("sf", s ? s.window : null);
  const kept = s ? SCHEDULE_KEPT.filter((k) => s[k] !== null && s[k] !== undefined && !(k === "priority" && s[k] === 5)) : [];
  $("#sf-kept").textContent = `Kept as they are (this form does not edit them): ${kept.map((k) => `${k} ${s[k]}`).join(", ")}`;
  $("#sf-kept").hidden = !kept.length;
  if (!s) return;
  $("#schedule-name").value = s.name;
  $("#schedule-when").value = s.cron || String(s.every);
  $("#schedule-timezone").value = s.timezone || "";
  $("#schedule-body").value = typeof s.body === "string" ? s.body : JSON.stringify(s.body);
  $("#schedule-target-url").value = targetText(s.target);
  $("#schedule-catch-up").value = s.catch_up || "skip";
  $("#schedule-jitter").value = s.jitter ? String(s.jitter) : "";
  $("#schedule-name").scrollIntoView({ block: "nearest" });
}

// The schedule as PUT replaces it: the form's fields, and what the form does not show (bounds, flow key,
// priority, an unchanged target's headers or kind) carried over from the schedule being edited.
function scheduleFormDoc(problems) {
  const edited = state.editingSchedule;
  const existing = edited && edited.queue === state.queue ? edited : {};
  const doc = {};
  for (const key of SCHEDULE_KEPT) {
    if (existing[key] !== undefined && existing[key] !== null) doc[key] = existing[key];
  }
  const rule = $("#schedule-when").value.trim();
  if (!rule) problems.add("#schedule-when", "is needed: a cron rule such as 0 9 * * MON-FRI, or seconds such as 3600");
  if (/^\d+(\.\d+)?$/.test(rule)) doc.every = Number(rule);
  else doc.cron = rule;
  if (timezoneOf("#schedule-timezone") === false) problems.add("#schedule-timezone", "is not a time zone (such as Europe/Paris or UTC)");
  const timezone = $("#schedule-timezone").value.trim();
  if (timezone) doc.timezone = timezone;
  const body = $("#schedule-body").value.trim();
  if (body) doc.body = parsed(body);
  const target = problems.url("#schedule-target-url", { required: false });
  if (target) doc.target = target === targetText(existing.target) ? existing.target : placeOf(target);
  doc.catch_up = $("#schedule-catch-up").value;
  const jitter = problems.number("#schedule-jitter", "jitter");
  if (jitter !== null) doc.jitter = jitter;
  const window = windowFormDoc("sf", problems);
  if (window) doc.window = window;
  return doc;
}

async function saveSchedule() {
  if (!state.queue) return notice("Pick a queue first.", true);
  const problems = new Problems();
  const name = problems.name("#schedule-name");
  const doc = scheduleFormDoc(problems);
  problems.check();
  await api("PUT", `${queuePath(state.queue)}/schedules/${enc(name)}`, doc);
  openScheduleForm(null);
  await loadSchedules();
  notice(`saved schedule ${name}`);
}

// --- bulk operations ----------------------------------------------------------------------------

async function runOperation(request, progress) {
  const base = `${queuePath(state.queue)}/operations`;
  let op = await api("POST", base, request);
  while (op.status === "running") {
    notice(`operation ${op.id} running: matched ${op.matched}, applied ${op.applied}`);
    if (progress) progress(op);
    await new Promise((resolve) => setTimeout(resolve, 500));
    op = await api("GET", `${base}/${enc(op.id)}`);
  }
  if (progress) progress(op);
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
  if (state.status) filter.status = state.status;
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

// Purge: cancel every pending message of the queue, one bulk operation, its progress on a bar.
async function purge() {
  if (!state.queue) return notice("Pick a queue first.", true);
  const queue = state.queue;
  const counts = await queueCounts(queue, await api("GET", queuePath(queue)));
  if (!confirm(`Purge ${queue}? This cancels all ${counts.pending} pending message(s). This cannot be undone.`)) {
    return notice(`nothing purged from ${queue}`);
  }
  const bar = $("#purge-progress");
  bar.hidden = false;
  const expected = Math.max(1, parseInt(counts.pending, 10) || 1);
  const op = await runOperation({ action: "cancel", filter: { status: "pending" } }, (o) => {
    bar.max = Math.max(expected, o.matched || 0, 1);
    bar.value = o.applied + o.skipped;
    if (o.status !== "running") bar.value = bar.max;
    const verb = o.status === "running" ? "purging" : `purge ${o.status}`;
    $("#purge-status").textContent = `${verb}: ${o.applied} of ${o.matched} cancelled`;
  });
  await listMessages(false);
  notice(`purge ${op.status}: cancelled ${op.applied} of ${op.matched} pending message(s)` +
    (op.skipped ? `, ${op.skipped} had already moved on` : "") + (op.error ? ` — ${op.error}` : ""), op.status !== "succeeded");
}

// --- charts -------------------------------------------------------------------------------------

function svg(name, attrs, text) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", name);
  Object.entries(attrs).forEach(([k, v]) => el.setAttribute(k, String(v)));
  if (text !== undefined) el.textContent = text;
  return el;
}

const hhmm = (iso) => iso.slice(11, 16);
const niceMax = (value) => {
  if (value <= 0) return 1;
  const step = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * step).find((v) => v >= value);
};
const label = (v) => (v >= 1000 ? `${+(v / 1000).toPrecision(3)}k` : `${+v.toPrecision(3)}`);

// A line chart with a time axis (HH:MM UTC) and a labelled value axis; `lines`: [{name, colour, values}].
function drawChart(el, times, lines, yTitle) {
  el.replaceChildren();
  el.setAttribute("viewBox", "0 0 560 220");
  const [w, h, left, right, top, bottom] = [560, 220, 52, 12, 14, 40];
  const all = lines.flatMap((l) => l.values).filter((v) => v !== null && v !== undefined);
  const ymax = niceMax(Math.max(0, ...all));
  const n = Math.max(times.length - 1, 1);
  const x = (i) => left + (i / n) * (w - left - right);
  const y = (v) => h - bottom - (v / ymax) * (h - bottom - top);
  for (let k = 0; k <= 4; k += 1) {
    const v = (ymax * k) / 4;
    el.appendChild(svg("line", { x1: left, y1: y(v), x2: w - right, y2: y(v), stroke: k ? "#eceef2" : "#889" }));
    el.appendChild(svg("text", { x: left - 4, y: y(v) + 4, "font-size": 10, "text-anchor": "end", class: "y-tick" }, label(v)));
  }
  el.appendChild(svg("line", { x1: left, y1: top, x2: left, y2: h - bottom, stroke: "#889" }));
  const every = Math.max(1, Math.round(times.length / 6));
  times.forEach((t, i) => {
    if (i % every !== 0 && i !== times.length - 1) return;
    el.appendChild(svg("line", { x1: x(i), y1: h - bottom, x2: x(i), y2: h - bottom + 4, stroke: "#889" }));
    const anchor = i === times.length - 1 ? "end" : i === 0 ? "start" : "middle";
    el.appendChild(svg("text", { x: x(i), y: h - bottom + 15, "font-size": 10, "text-anchor": anchor, class: "x-tick" }, hhmm(t)));
  });
  el.appendChild(svg("text", { x: (left + w - right) / 2, y: h - 6, "font-size": 11, "text-anchor": "middle", class: "x-title" }, "time (UTC)"));
  el.appendChild(svg("text", { x: 12, y: (top + h - bottom) / 2, "font-size": 11, "text-anchor": "middle",
    transform: `rotate(-90 12 ${(top + h - bottom) / 2})`, class: "y-title" }, yTitle));
  lines.forEach((line, li) => {
    let d = "";
    line.values.forEach((v, i) => {
      if (v === null || v === undefined) return;
      d += `${d && line.values[i - 1] !== null && line.values[i - 1] !== undefined ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    });
    el.appendChild(svg("path", { d, fill: "none", stroke: line.colour, "stroke-width": 1.6, class: `series series-${line.name}` }));
    // A value with no neighbour draws no line: a dot shows it (a lateness seen in one minute only).
    const missing = (i) => i < 0 || i >= line.values.length || line.values[i] === null || line.values[i] === undefined;
    line.values.forEach((v, i) => {
      if (!missing(i) && missing(i - 1) && missing(i + 1)) {
        el.appendChild(svg("circle", { cx: x(i), cy: y(v), r: 2.5, fill: line.colour, class: `dot dot-${line.name}` }));
      }
    });
    el.appendChild(svg("text", { x: w - right - 4 - li * 70, y: top + 2, "font-size": 11, fill: line.colour, "text-anchor": "end", class: `legend legend-${line.name}` }, line.name));
  });
}

// Depth is not measured per minute: it is derived back from the pending count now and each period's
// flow (scheduled and redelivered in; delivered, failed, expired and cancelled out).
function depthSeries(series, pendingNow) {
  const n = series.delivered.length;
  const depth = new Array(n).fill(null);
  if (pendingNow === null) return depth;
  let level = pendingNow;
  for (let i = n - 1; i >= 0; i -= 1) {
    depth[i] = Math.max(0, level);
    const inflow = (series.scheduled[i] || 0) + (series.redelivered[i] || 0);
    const outflow = ["delivered", "failed", "expired", "cancelled"].reduce((sum, k) => sum + (series[k][i] || 0), 0);
    level -= inflow - outflow;
  }
  return depth;
}

async function loadCharts() {
  if (!state.queue) return;
  const latest = newRun("charts");
  const queue = state.queue;
  let doc;
  try {
    doc = await api("GET", `${queuePath(queue)}/metrics?range=${state.range}`);
  } catch (error) {
    if (!latest()) return;
    document.querySelectorAll("#view-charts svg").forEach((el) => el.replaceChildren());
    $("#chart-source").textContent = "";
    if (noRoute(error)) return info("This API has no metrics endpoint (GET /v1/queues/{queue}/metrics).", "charts");
    throw error;
  }
  const counts = await queueCounts(queue).catch(() => null);
  if (!latest()) return;
  const s = doc.series;
  const perMinute = (values) => values.map((v) => (v === null ? null : v / (doc.period / 60)));
  const pending = counts ? parseInt(counts.pending, 10) : null;
  drawChart($("#chart-deliveries"), doc.times, [{ name: "delivered", colour: "#137333", values: perMinute(s.delivered) }], "per minute");
  const failed = s.failed.map((v, i) => v + (s.expired[i] || 0));
  drawChart($("#chart-failures"), doc.times, [
    { name: "failed", colour: "#b00020", values: perMinute(failed) },
    { name: "retried", colour: "#a05a00", values: perMinute(s.retried) },
  ], "per minute");
  drawChart($("#chart-lateness"), doc.times, [
    { name: "p50", colour: "#1a56c4", values: s.lateness_p50_ms },
    { name: "p99", colour: "#b00020", values: s.lateness_p99_ms },
  ], "ms");
  drawChart($("#chart-depth"), doc.times, [{ name: "pending", colour: "#6a1ab0", values: depthSeries(s, Number.isNaN(pending) ? null : pending) }], "messages");
  const source = doc.source === "cloudwatch" ? "from the stack's CloudWatch metrics" : "from the local runtime (since it started)";
  const step = doc.period === 60 ? "per minute" : `per ${doc.period / 60} minutes, shown as a rate per minute`;
  $("#chart-source").textContent = `${queue}: ${source}, ${step}; depth derived from the pending count now and each period's flow.`;
  $("#view-charts").dataset.drawn = `${queue}:${state.range}`;
}

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] : 0;
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
  for (const [value, name, colour] of [[p50, "p50", "#1a56c4"], [p99, "p99", "#b00020"]]) {
    chart.appendChild(svg("line", { x1: left, y1: y(value), x2: w - 5, y2: y(value), stroke: colour, "stroke-dasharray": "4 3" }));
    chart.appendChild(svg("text", { x: w - 40, y: y(value) - 3, "font-size": 11, fill: colour, class: `label-${name}` }, name));
  }
  for (const p of points) {
    chart.appendChild(svg("circle", { cx: x(p.due), cy: y(p.late), r: 2.5, fill: "#137333", class: "point" }));
  }
}

// --- wiring -------------------------------------------------------------------------------------

const loaders = {
  queues: loadQueues, messages: () => listMessages(false), failed: loadFailed, schedules: loadSchedules,
  charts: loadCharts, lateness: loadLateness,
};

function show(view) {
  state.view = view;
  document.querySelectorAll("nav button").forEach((b) => b.classList.toggle("active", b.dataset.view === view));
  document.querySelectorAll(".view").forEach((s) => { s.hidden = s.id !== `view-${view}`; });
  if ($("#key-view").dataset.queue !== state.queue) $("#key-view").hidden = true;
  return guarded(loaders[view]);
}

// Auto-refresh reloads the view shown (and an open timeline) without a word in the notice; a form
// being typed in is never reset by it.
async function refresh() {
  if (!state.autoRefresh || state.refreshing || document.hidden || !sessionStorage.getItem("hourglass.key")) return;
  state.refreshing = true;
  try {
    await loaders[state.view]();
    const { queue, id } = $("#timeline").dataset;
    if (!$("#timeline").hidden && queue && id) await openTimeline(queue, id);
    const keyView = $("#key-view");
    if (state.view === "messages" && !keyView.hidden) await showKey(keyView.dataset.queue, keyView.dataset.key);
    $("#refreshed-at").textContent = `refreshed ${new Date().toISOString().slice(11, 19)}Z`;
  } catch (error) {
    $("#refreshed-at").textContent = `refresh failed: ${error.message}`;
  } finally {
    state.refreshing = false;
  }
}

function setAutoRefresh(on) {
  state.autoRefresh = on;
  const toggle = $("#auto-refresh");
  toggle.setAttribute("aria-pressed", String(on));
  toggle.textContent = on ? "Pause auto-refresh" : "Resume auto-refresh";
  $("#refreshed-at").textContent = on ? "" : "auto-refresh paused";
}

function wireTimeline() {
  for (const [kind, selector] of Object.entries(TIMELINE_BUTTONS)) {
    $(selector).addEventListener("click", () => guarded(() => {
      const { queue, id } = $("#timeline").dataset;
      return runMessageAction(kind, { queue, id });
    }));
  }
  $("#close-timeline").addEventListener("click", () => { $("#timeline").hidden = true; });
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
  $("#new-queue").addEventListener("click", () => openQueueForm(null));
  $("#qf-target-type").addEventListener("change", (e) => {
    $("#qf-target-url").readOnly = !FORM_TARGETS.includes(e.target.value);
  });
  $("#cancel-queue-form").addEventListener("click", () => { $("#queue-form").hidden = true; state.editing = null; });
  // A refused save is said next to the Save button too, where the eye is.
  $("#queue-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const [form, errors] = [$("#queue-form"), $("#qf-error")];
    clearProblems(form, errors);
    guarded(() => saveQueue().catch((error) => { formFailure(form, errors, QUEUE_INPUTS, error); throw error; }));
  });
  $("#filter-form").addEventListener("submit", (e) => { e.preventDefault(); guarded(() => listMessages(false)); });
  $("#order").addEventListener("change", () => guarded(() => listMessages(false)));
  $("#more").addEventListener("click", () => guarded(() => listMessages(true)));
  $("#find-message").addEventListener("click", () => guarded(findMessage));
  // The key as typed ("" is the key of messages without one).
  $("#show-key").addEventListener("click", () => guarded(() => (state.queue ? showKey(state.queue, $("#key-lookup").value) : notice("Pick a queue first.", true))));
  $("#close-key-view").addEventListener("click", () => { $("#key-view").hidden = true; });
  $("#qf-ordering").addEventListener("change", syncOrderingForm);
  document.querySelectorAll(".select-all").forEach((all) => all.addEventListener("change", () => {
    all.closest("table").querySelectorAll("input.pick").forEach((box) => { box.checked = all.checked; });
  }));
  $("#cancel-selected").addEventListener("click", () => guarded(async () => {
    await eachMessage(picked("#messages-table"), "cancelled", (id) => cancelMessage(state.queue, id));
    const text = $("#notice").textContent;
    await listMessages(false);
    notice(text);
  }));
  $("#purge").addEventListener("click", () => guarded(purge));
  $("#redeliver-selected").addEventListener("click", () => guarded(async () => {
    await eachMessage(picked("#failed-table"), "redelivered", (id) => api("POST", `${messagePath(state.queue, id)}/redeliver`));
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
  $("#schedule-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const [form, errors] = [$("#schedule-form"), $("#sf-error")];
    clearProblems(form, errors);
    guarded(() => saveSchedule().catch((error) => { formFailure(form, errors, SCHEDULE_INPUTS, error); throw error; }));
  });
  $("#new-schedule").addEventListener("click", () => openScheduleForm(null));
  document.querySelectorAll("#chart-range button").forEach((b) => b.addEventListener("click", () => {
    state.range = b.dataset.range;
    document.querySelectorAll("#chart-range button").forEach((o) => o.classList.toggle("active", o === b));
    guarded(loadCharts);
  }));
  wireTimeline();
  $("#auto-refresh").addEventListener("click", () => setAutoRefresh(!state.autoRefresh));
  // `?refresh=off` starts with auto-refresh paused (a link for screens that must hold still).
  setAutoRefresh(new URLSearchParams(location.search).get("refresh") !== "off");
  setInterval(refresh, REFRESH_MS);
  show("queues");
}

document.addEventListener("DOMContentLoaded", wire);
