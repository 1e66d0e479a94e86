// Models and deployments: each route with its deployments, prices, routing
// options, and each deployment's health as the last hour of the ledger
// shows it (errors, latency), plus the live cooldowns of the node that
// answers (ListModels' health).

import { rpc, can } from "../api.js";
import { h, table, empty, pageHead, badge, card } from "../ui.js";
import { count, micros, nowUnix, ago } from "../format.js";

export async function modelsPage() {
  const [models, prices, logs, creds] = await Promise.all([
    rpc("ModelService", "ListModels", {}),
    rpc("ModelService", "ListPrices", {}).catch(() => ({ prices: [] })),
    can("spend.read") ? rpc("SpendService", "SpendLogs", { since: nowUnix() - 3600, limit: 5000 }).catch(() => ({ records: [] })) : { records: [] },
    can("credentials.read") ? rpc("CredentialService", "ListCredentials", {}).catch(() => ({ credentials: [] })) : { credentials: [] },
  ]);
  const routes = models.routes || [];
  const stats = deploymentStats(logs.records || []);
  const priceOf = (route, dep) => (prices.prices || []).find((p) => p.model === route && p.deployment === dep);
  const live = new Map((models.health || []).map((x) => [`${x.route}/${x.deployment}`, x]));
  return h("div.page",
    pageHead("Models", "Model routes and the deployments that serve them; health from the last hour of requests."),
    routes.length ? routes.map((r) => routeCard(r, stats, priceOf, live)) :
      h("section.card", empty("No models yet — add one with tollctl model add.")),
    creds.credentials?.length ? card("Credentials", table([
      { title: "Name", cell: (c) => h("span.strong", c.name) },
      { title: "Value", cell: (c) => h("span.mono", `••••${c.hint}`) },
      { title: "Updated", cell: (c) => ago(c.updated_at) },
    ], creds.credentials, { id: "credentials" })) : null);
}

// deploymentStats sums the last hour's records per route/deployment.
function deploymentStats(records) {
  const m = new Map();
  for (const r of records) {
    if (!r.deployment) continue;
    const k = `${r.model}/${r.deployment}`;
    const s = m.get(k) || { n: 0, errors: 0, lat: [] };
    s.n++;
    if (r.status >= 500 || r.status === 429) s.errors++;
    s.lat.push(Number(r.latency_micros));
    m.set(k, s);
  }
  for (const s of m.values()) { s.lat.sort((a, b) => a - b); s.p50 = s.lat[Math.floor(s.lat.length / 2)]; }
  return m;
}

function health(d, s, l) {
  if (l?.cooling && l.cooldown_until) {
    return badge(`cooling down until ${new Date(l.cooldown_until).toLocaleTimeString()} (${l.consecutive_failures} failures, node ${l.node})`, "warn");
  }
  if (d.health && d.health !== "healthy") return badge(d.health, "bad");
  if (!s) return badge(d.health || "no traffic", d.health ? "ok" : "neutral");
  const rate = s.errors / s.n;
  if (rate >= 0.5) return badge(`failing · ${Math.round(rate * 100)} % errors`, "bad");
  if (rate > 0.05) return badge(`degraded · ${Math.round(rate * 100)} % errors`, "warn");
  return badge("healthy", "ok");
}

function price(p) {
  if (!p?.price) return h("span.muted", "unknown");
  const per = (v) => `$${(Number(v) / 1e6).toFixed(2)}`;
  return h("span", { title: p.source }, `${per(p.price.input_micros_per_mtok)} / ${per(p.price.output_micros_per_mtok)}`);
}

function routeCard(r, stats, priceOf, live) {
  const o = r.options || {};
  const facts = [
    ["Strategy", o.strategy || "weighted"],
    ["Fallbacks", o.fallbacks?.join(", ") || "—"],
    ["Aliases", o.aliases?.join(", ") || "—"],
    ["Attempts", o.max_attempts || "default"],
  ];
  return h("section.card.route", { dataset: { route: r.name } },
    h("div.route-head", h("h3.card-title", r.name), h("div.route-facts", facts.map(([k, v]) => h("span.fact", h("span.muted", k + " "), String(v))))),
    table([
      { title: "Deployment", cell: (d) => h("div", h("div.strong", d.id), h("div.small.muted", d.provider)) },
      { title: "Upstream", cell: (d) => h("div", h("div.mono.small", d.upstream_model), h("div.small.muted", d.base_url)) },
      { title: "Weight", cls: "num", cell: (d) => String(d.weight || 1) },
      { title: "Priority", cls: "num", cell: (d) => String(d.priority || 0) },
      { title: "Price in / out per 1M", cell: (d) => price(priceOf(r.name, d.id)) },
      { title: "Health", cell: (d) => health(d, stats.get(`${r.name}/${d.id}`), live.get(`${r.name}/${d.id}`)) },
      { title: "Last hour", cls: "num", cell: (d) => {
        const s = stats.get(`${r.name}/${d.id}`);
        return s ? `${count(s.n)} req · p50 ${micros(s.p50)}` : h("span.muted", "—");
      } },
    ], r.deployments || []));
}
