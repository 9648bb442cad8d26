// The berth dashboard: polls the JSON API every 2 s and fills the tables. Data goes in with
// textContent only (names and messages come from users' manifests).
"use strict";

const REFRESH_MS = 2000;
const GI = 1024 ** 3;
const MI = 1024 ** 2;

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

// Amounts come in berth's units: milli-CPU, bytes, counts.
function amount(resource, value) {
  if (value === null || value === undefined) return "–";
  if (resource === "cpu") return String(Math.round(value) / 1000);
  if (resource === "memory" || resource === "ephemeral-storage") {
    if (value >= GI) return (value / GI).toFixed(value % GI === 0 ? 0 : 1) + "Gi";
    if (value >= MI) return (value / MI).toFixed(0) + "Mi";
    return String(value);
  }
  return String(value);
}

function ms(value) {
  if (value === null || value === undefined) return "–";
  return value >= 1000 ? (value / 1000).toFixed(2) + " s" : Math.round(value) + " ms";
}

function share(value) {
  return value >= 2 ** 62 ? "∞" : String(value);
}

function usageCell(r) {
  const td = el("td", amount(r.resource, r.usage), "num");
  const bar = el("span", null, "bar");
  const fill = el("i", null, r.usage > r.nominal ? "over" : "");
  const ratio = r.nominal > 0 ? Math.min(1, r.usage / r.nominal) : (r.usage > 0 ? 1 : 0);
  fill.style.width = Math.round(ratio * 100) + "%";
  bar.appendChild(fill);
  td.appendChild(bar);
  return td;
}

function pendingCell(pending) {
  const td = el("td");
  const reasons = Object.keys(pending);
  if (reasons.length === 0) td.appendChild(el("span", "none", "muted"));
  for (const reason of reasons) {
    td.appendChild(el("span", reason + " " + pending[reason], "chip reason-" + reason));
  }
  return td;
}

function renderClusterQueues(body) {
  const cqTable = document.getElementById("cq-table");
  const tenantTable = document.getElementById("tenant-table");
  const title = document.getElementById("queues-title");
  if (body.clusterQueues.length === 0 && body.tenants) {
    cqTable.hidden = true;
    tenantTable.hidden = false;
    title.textContent = "Tenant queues (no ClusterQueue defined)";
    const tbody = tenantTable.tBodies[0];
    const rows = [];
    for (const [tenant, c] of Object.entries(body.tenants)) {
      const tr = el("tr");
      tr.appendChild(el("td", tenant));
      for (const key of ["active", "backoff", "unschedulable", "gated", "inflight", "pending"]) {
        tr.appendChild(el("td", c[key], "num"));
      }
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
    return;
  }
  cqTable.hidden = false;
  tenantTable.hidden = true;
  title.textContent = "Cluster queues";
  const rows = [];
  for (const cq of body.clusterQueues) {
    const resources = cq.resources.length ? cq.resources : [null];
    resources.forEach((r, i) => {
      const tr = el("tr", null, i === 0 ? "first" : "");
      tr.dataset.queue = cq.name;
      if (i === 0) {
        const span = resources.length;
        for (const [text, cls] of [
          [cq.name, "cq-name"], [cq.cohort || "–", ""], [cq.weight, "num"], [share(cq.share), "num"],
        ]) {
          const td = el("td", text, cls);
          td.rowSpan = span;
          tr.appendChild(td);
        }
      }
      if (r === null) {
        tr.appendChild(el("td", "no quota", "muted"));
        for (let k = 0; k < 6; k++) tr.appendChild(el("td", "–"));
      } else {
        tr.appendChild(el("td", r.flavor + " / " + r.resource));
        tr.appendChild(el("td", amount(r.resource, r.nominal), "num"));
        tr.appendChild(usageCell(r));
        tr.appendChild(el("td", amount(r.resource, r.borrowed), "num"));
        tr.appendChild(el("td", amount(r.resource, r.lent), "num"));
        tr.appendChild(el("td", amount(r.resource, r.borrowingLimit), "num"));
        tr.appendChild(el("td", amount(r.resource, r.lendingLimit), "num"));
      }
      if (i === 0) {
        const admitted = el("td", cq.admittedPods, "num");
        admitted.rowSpan = resources.length;
        tr.appendChild(admitted);
        const pending = pendingCell(cq.pending);
        pending.rowSpan = resources.length;
        tr.appendChild(pending);
      }
      rows.push(tr);
    });
  }
  cqTable.tBodies[0].replaceChildren(...rows);
}

function renderPods(body) {
  const rows = body.pods.map((p) => {
    const tr = el("tr");
    tr.dataset.pod = p.namespace + "/" + p.name;
    tr.appendChild(el("td", p.namespace + "/" + p.name, "pod-name"));
    tr.appendChild(el("td", p.status));
    tr.appendChild(el("td", p.reason, "reason reason-" + p.reason));
    tr.appendChild(el("td", p.reasonMessage, "why"));
    tr.appendChild(el("td", p.clusterQueue || "–"));
    tr.appendChild(el("td", p.attempts, "num"));
    tr.appendChild(el("td", p.nominatedNode || "–"));
    tr.appendChild(el("td", p.node || "–"));
    return tr;
  });
  document.querySelector("#pods-table tbody").replaceChildren(...rows);
  const shown = body.pods.length;
  const noun = body.total === 1 ? "pod" : "pods";
  document.getElementById("pods-count").textContent =
    shown === body.total ? `${body.total} ${noun}` : `${shown} of ${body.total} ${noun} shown`;
}

function renderStats(body) {
  document.getElementById("stats-rate").textContent = body.podsPerSecond.toFixed(1);
  document.getElementById("stats-p50").textContent = ms(body.latencyP50Ms);
  document.getElementById("stats-p99").textContent = ms(body.latencyP99Ms);
  document.getElementById("stats-window").textContent =
    `${body.bound} bound in the last ${Math.round(body.windowSeconds)} s`;
}

function renderEvents(body) {
  const rows = body.events.map((e) => {
    const tr = el("tr");
    tr.appendChild(el("td", new Date(e.time * 1000).toLocaleTimeString()));
    tr.appendChild(el("td", e.pod, "pod-name"));
    tr.appendChild(el("td", e.type));
    tr.appendChild(el("td", e.reason, "reason"));
    tr.appendChild(el("td", e.message, "why"));
    return tr;
  });
  document.querySelector("#events-table tbody").replaceChildren(...rows);
}

// With a tokens file the API needs a token: asked for on a 401, kept for this tab only.
const TOKEN_KEY = "berth-token";

async function getJson(path) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const response = await fetch(path, { cache: "no-store", headers });
  if (!response.ok) {
    let message = String(response.status);
    try {
      message += ": " + (await response.json()).error;
    } catch (_) {
      // not JSON: the status says enough
    }
    if (response.status === 401) document.getElementById("token-form").hidden = false;
    throw new Error(message);
  }
  return response.json();
}

function podsPath() {
  const params = new URLSearchParams();
  const q = document.getElementById("search").value.trim();
  const ns = document.getElementById("namespace").value.trim();
  if (q) params.set("q", q);
  if (ns) params.set("namespace", ns);
  const query = params.toString();
  return "/api/pods" + (query ? "?" + query : "");
}

let refreshing = false;
let again = false;

async function refresh() {
  if (refreshing) {
    again = true; // a search typed meanwhile: once more when this one is done
    return;
  }
  refreshing = true;
  const updated = document.getElementById("updated");
  try {
    const [queues, pods, stats] = await Promise.all([
      getJson("/api/clusterqueues"), getJson(podsPath()), getJson("/api/stats"),
    ]);
    renderClusterQueues(queues);
    renderPods(pods);
    renderStats(stats);
    // Events are the node agent's (standalone mode); their absence never fails the page.
    getJson("/api/events?limit=50").then(renderEvents).catch(() => {});
    updated.textContent = "updated " + new Date().toLocaleTimeString() +
      ` (resourceVersion ${queues.resourceVersion})`;
    document.body.dataset.loaded = "true";
  } catch (err) {
    updated.textContent = "update failed: " + err.message;
  } finally {
    refreshing = false;
  }
  if (again) {
    again = false;
    refresh();
  }
}

document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
  document.getElementById("token-form").hidden = true;
  refresh();
});
document.getElementById("search-form").addEventListener("submit", (e) => {
  e.preventDefault();
  refresh();
});
document.getElementById("search").addEventListener("input", () => refresh());
document.getElementById("namespace").addEventListener("input", () => refresh());
refresh();
setInterval(refresh, REFRESH_MS);
