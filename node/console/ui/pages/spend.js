// Spend: cost over time stacked by team, key or model, requests over time,
// totals per group, and a CSV export of the same report.

import { rpc, can } from "../api.js";
import { h, card, table, empty, pageHead, select, field, stat } from "../ui.js";
import { barChart, lineChart, hbars, palette } from "../charts.js";
import { money, moneyShort, dollarsNumber, count, countShort, nowUnix } from "../format.js";

const ranges = { "24h": { label: "Last 24 hours", step: 3600, n: 24 }, "7d": { label: "Last 7 days", step: 86400, n: 7 },
  "30d": { label: "Last 30 days", step: 86400, n: 30 } };
const groups = [["team", "Team"], ["key", "Key"], ["model", "Model"]];
const TOP = 6;

// buckets returns the bucket starts (Unix seconds): whole UTC hours or days.
function buckets(range) {
  const { step, n } = ranges[range];
  const last = Math.floor(nowUnix() / step) * step;
  return Array.from({ length: n }, (_, i) => last - (n - 1 - i) * step);
}

function bucketLabel(t, step) {
  const d = new Date(t * 1000);
  if (step === 3600) return String(d.getUTCHours()).padStart(2, "0") + ":00";
  return `${d.getUTCMonth() + 1}/${d.getUTCDate()}`;
}

// mapLimit runs fn over items with at most n calls at once.
async function mapLimit(items, n, fn) {
  const out = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length) { const i = next++; out[i] = await fn(items[i], i); }
  }));
  return out;
}

export async function spendPage(params, { setParams }) {
  const range = ranges[params.get("range")] ? params.get("range") : "7d";
  const by = groups.some(([g]) => g === params.get("by")) ? params.get("by") : "team";
  const { step } = ranges[range];
  const starts = buckets(range);
  const since = starts[0], until = nowUnix();
  const [totals, perBucket] = await Promise.all([
    rpc("SpendService", "SpendReport", { by, since, until }),
    mapLimit(starts, 6, (t) => rpc("SpendService", "SpendReport", { by, since: t, until: Math.min(t + step, until) })),
  ]);
  const rows = (totals.rows || []).slice().sort((a, b) => Number(b.cost_nanos) - Number(a.cost_nanos));
  const names = await groupNames(by, rows.slice(0, 20).map((r) => r.group));
  const label = (g) => (g ? names.get(g) || g : by === "team" ? "No team" : "(none)");
  const top = rows.slice(0, TOP).map((r) => r.group);
  const series = top.map((g) => ({ name: label(g), values: perBucket.map((b) => dollarsNumber(b.rows?.find((r) => r.group === g)?.cost_nanos)) }));
  if (rows.length > TOP) {
    series.push({ name: "Other", color: palette[7], values: perBucket.map((b) => (b.rows || []).filter((r) => !top.includes(r.group))
      .reduce((a, r) => a + dollarsNumber(r.cost_nanos), 0)) });
  }
  const labels = starts.map((t) => bucketLabel(t, step));
  const reqs = perBucket.map((b) => Number(b.total?.requests || 0));
  const csv = `/api/spend.csv?${new URLSearchParams({ by, since, until })}`;
  const controls = h("div.toolbar",
    field("Period", select("range", Object.entries(ranges).map(([k, v]) => [k, v.label]), range)),
    field("Group by", select("by", groups, by)));
  controls.addEventListener("change", (e) => setParams({ range: e.target.name === "range" ? e.target.value : range, by: e.target.name === "by" ? e.target.value : by }));
  return h("div.page",
    pageHead("Spend", `${ranges[range].label}, by ${by} (UTC buckets; cluster-wide rollups).`,
      h("a.btn.secondary", { href: csv, download: `spend-by-${by}.csv`, id: "spend-csv" }, "Export CSV")),
    controls,
    h("div.stats",
      stat("Spend", money(totals.total?.cost_nanos), ranges[range].label.toLowerCase()),
      stat("Requests", count(totals.total?.requests)),
      stat("Tokens in / out", `${countShort(Number(totals.total?.prompt_tokens || 0))} / ${countShort(Number(totals.total?.completion_tokens || 0))}`),
      stat("Unpriced requests", count(totals.total?.unpriced_requests), "cost unknown")),
    card(`Cost by ${by}`, barChart({ id: "spend-chart", labels, series, yFormat: moneyShort, width: 1000, height: 300, emptyText: "No spend in this period yet." })),
    h("div.grid-2",
      card("Requests", lineChart({ id: "spend-requests", labels, series: [{ name: "Requests", values: reqs }], yFormat: countShort, width: 560,
        emptyText: "No requests in this period yet." })),
      card(`Top ${by}s by cost`, rows.length ? hbars(rows.slice(0, 8).map((r) => ({ name: label(r.group), value: dollarsNumber(r.cost_nanos) })), { format: moneyShort })
        : empty("No spend in this period yet."))),
    card(`Totals by ${by}`, rows.length ? table([
      { title: groups.find(([g]) => g === by)[1], cell: (r) => h("span", { title: r.group }, label(r.group)) },
      { title: "Requests", cls: "num", cell: (r) => count(r.requests) },
      { title: "Prompt tokens", cls: "num", cell: (r) => count(r.prompt_tokens) },
      { title: "Completion tokens", cls: "num", cell: (r) => count(r.completion_tokens) },
      { title: "Cached", cls: "num", cell: (r) => count(r.cached_tokens) },
      { title: "Cost", cls: "num", cell: (r) => h("span.strong", money(r.cost_nanos)) },
    ], rows, { id: "spend-totals" }) : empty("No spend in this period yet.")));
}

// groupNames maps team ids, and the ids of the top keys, to names where the
// role can read them.
async function groupNames(by, ids) {
  const m = new Map();
  try {
    if (by === "team" && can("teams.read")) {
      for (const t of (await rpc("TeamService", "ListTeams", {})).teams || []) m.set(t.id, t.name);
    }
    if (by === "key" && can("keys.read")) {
      const got = await Promise.all(ids.filter(Boolean).map((id) => rpc("KeyService", "GetKey", { id }).catch(() => null)));
      for (const g of got) if (g?.key?.name) m.set(g.key.id, g.key.name);
    }
  } catch { /* ids stay ids */ }
  return m;
}
