// Overview: traffic and errors over the last 24 hours, spend today,
// budgets near their limit, and the cluster's members and leader.

import { rpc, can, state } from "../api.js";
import { h, card, stat, table, badge, empty, pageHead, progress, loading, clear } from "../ui.js";
import { barChart } from "../charts.js";
import { money, count, countShort, pct, nowUnix, fromUnixNanos } from "../format.js";

const HOUR = 3600;

// settle runs a call and keeps its error instead of throwing, so one card
// that cannot load does not take the page down.
const settle = (p) => p.then((v) => ({ v }), (e) => ({ e }));

export async function overviewPage() {
  const now = nowUnix();
  const firstHour = Math.floor(now / HOUR) * HOUR - 23 * HOUR;
  const midnight = new Date(); midnight.setHours(0, 0, 0, 0);
  const spend = can("spend.read");
  const [hours, errors, today, cluster] = await Promise.all([
    spend ? settle(rpc("SpendService", "SpendReport", { by: "hour", since: firstHour })) : null,
    spend ? settle(rpc("SpendService", "SpendLogs", { since: firstHour, errors_only: true, limit: 10000 })) : null,
    spend ? settle(rpc("SpendService", "SpendReport", { by: "model", since: Math.floor(midnight / 1000) })) : null,
    can("cluster.read") ? settle(rpc("ClusterService", "Status", {})) : null,
  ]);
  const traffic = trafficSeries(firstHour, hours?.v, errors?.v);
  const budgets = h("div", { id: "budgets-near-limit" }, loading());
  nearLimit(budgets);
  return h("div.page",
    pageHead("Overview", `Node ${state.config.node} · the last 24 hours`),
    h("div.stats",
      stat("Requests (24 h)", hours?.v ? count(traffic.total) : "—", "all nodes", "stat-requests"),
      stat("Errors (24 h)", errors?.v ? count(traffic.errors) : "—", traffic.total ? `${pct(traffic.errors, traffic.total).toFixed(1)} % of requests` : "", "stat-errors"),
      stat("Spend today", today?.v ? money(today.v.total?.cost_nanos) : "—", today?.v ? `${count(today.v.total?.requests)} requests since midnight` : "", "stat-spend-today"),
      stat("Cluster", cluster?.v ? `${cluster.v.members.filter((m) => m.health === "healthy").length} / ${cluster.v.members.length}` : "—",
        cluster?.v ? `healthy members · leader ${cluster.v.leader || "none"}` : "")),
    h("div.grid-2",
      card("Requests and errors per hour", hours?.e ? empty(hours.e.message) : !spend ? empty("Your role cannot see traffic.") :
        barChart({ id: "overview-traffic", labels: traffic.labels, stacked: false, yFormat: countShort, width: 540, height: 250,
          series: [{ name: "Requests", values: traffic.requests }, { name: "Errors", values: traffic.errorsPerHour, color: "#d9486b" }],
          emptyText: "No requests in the last 24 hours." })),
      card("Budgets near their limit", budgets)),
    card("Cluster members", clusterTable(cluster)));
}

// trafficSeries counts requests (rollups) and errors (raw records) per hour.
function trafficSeries(firstHour, report, logs) {
  const labels = [], requests = [], errorsPerHour = [];
  const index = new Map();
  for (let i = 0; i < 24; i++) {
    const t = firstHour + i * HOUR;
    index.set(t, i);
    labels.push(String(new Date(t * 1000).getHours()).padStart(2, "0") + ":00");
    requests.push(0); errorsPerHour.push(0);
  }
  for (const r of report?.rows || []) {
    const i = index.get(hourOf(r.group));
    if (i !== undefined) requests[i] += Number(r.requests);
  }
  for (const rec of logs?.records || []) {
    const t = Math.floor(fromUnixNanos(rec.unix_nanos).getTime() / 1000 / HOUR) * HOUR;
    const i = index.get(t);
    if (i !== undefined) errorsPerHour[i]++;
  }
  const sum = (a) => a.reduce((x, y) => x + y, 0);
  return { labels, requests, errorsPerHour, total: sum(requests), errors: sum(errorsPerHour) };
}

// hourOf reads a by=hour group ("2026-12-01T14:00Z", UTC).
function hourOf(group) {
  return Math.floor(Date.parse(group) / 1000 / HOUR) * HOUR;
}

function clusterTable(cluster) {
  if (!cluster) return empty("Your role cannot see the cluster.");
  if (cluster.e) return empty(cluster.e.message);
  const s = cluster.v;
  return table([
    { title: "Node", cell: (m) => h("span.strong", m.id, m.id === s.node ? h("span.muted", " (this node)") : null) },
    { title: "Raft", cell: (m) => (m.leader ? badge("leader", "info") : m.role) },
    { title: "Gossip", cell: (m) => m.gossip_state },
    { title: "Health", cell: (m) => badge(m.health, m.health === "healthy" ? "ok" : "bad") },
    { title: "Data plane", cell: (m) => h("span.mono", m.http_address || "—") },
    { title: "Version", cell: (m) => m.version || "—" },
  ], s.members || [], { id: "cluster-members" });
}

// nearLimit fills el with the budgets that are most used: every team
// budget, and the keys that spent the most this month (a key that spent
// nothing cannot be near its limit), at most 10 lookups of each.
async function nearLimit(el) {
  const rows = [];
  try {
    if (can("teams.read")) {
      const teams = ((await rpc("TeamService", "ListTeams", {})).teams || []).filter((t) => t.budget).slice(0, 10);
      const got = await Promise.all(teams.map((t) => rpc("TeamService", "GetTeam", { id: t.id }).catch(() => null)));
      got.forEach((g, i) => g?.budget_status && rows.push({ name: `Team ${teams[i].name}`, bs: g.budget_status }));
    }
    if (can("spend.read") && can("keys.read")) {
      const since = Math.floor(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1) / 1000);
      const top = ((await rpc("SpendService", "SpendReport", { by: "key", since })).rows || [])
        .sort((a, b) => Number(b.cost_nanos) - Number(a.cost_nanos)).slice(0, 10);
      const got = await Promise.all(top.map((r) => rpc("KeyService", "GetKey", { id: r.group }).catch(() => null)));
      got.forEach((g) => g?.budget_status && rows.push({ name: `Key ${g.key.name || g.key.id}`, bs: g.budget_status }));
    }
  } catch (e) {
    return clear(el, empty(`Budgets could not be read: ${e.message}`));
  }
  rows.forEach((r) => (r.p = pct(r.bs.spent_nanos, r.bs.limit_nanos)));
  rows.sort((a, b) => b.p - a.p);
  if (!rows.length) return clear(el, empty("No budget has been spent from yet."));
  clear(el, h("div.budget-list", rows.slice(0, 6).map((r) => h("div.budget-item",
    h("div.budget-item-head", h("span.strong", r.name), h("span", `${money(r.bs.spent_nanos)} of ${money(r.bs.limit_nanos)} · ${r.bs.period}`)),
    progress(r.p), h("div.small.muted", `${r.p.toFixed(0)} % used${r.p >= 90 ? " — at its limit soon" : ""}`)))));
}
