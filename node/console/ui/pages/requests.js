// Requests: the newest raw ledger records of every live node (SpendLogs),
// filtered by key, team, model and errors only.

import { rpc, can } from "../api.js";
import { h, clientPaged, empty, pageHead, badge, field, input, select, checkbox, formValues, clear, loading, showError } from "../ui.js";
import { money, count, micros, whenSeconds, fromUnixNanos } from "../format.js";

export async function requestsPage(params, { setParams }) {
  const teams = can("teams.read") ? ((await rpc("TeamService", "ListTeams", {}).catch(() => ({}))).teams || []) : [];
  const teamName = (id) => teams.find((t) => t.id === id)?.name || id;
  const f = { key_id: params.get("key") || "", team_id: params.get("team") || "", model: params.get("model") || "",
    errors_only: params.get("errors") === "1", limit: Number(params.get("limit")) || 500 };
  const form = h("form.toolbar.filters", { id: "request-filters", onsubmit: (e) => {
    e.preventDefault();
    const v = formValues(form);
    setParams({ key: v.key_id, team: v.team_id, model: v.model, errors: v.errors_only ? "1" : "", limit: v.limit === "500" ? "" : v.limit });
  } },
  field("Key id", input("key_id", { value: f.key_id, placeholder: "any key" })),
  field("Team", select("team_id", [["", "Any team"], ...teams.map((t) => [t.id, t.name])], f.team_id)),
  field("Model", input("model", { value: f.model, placeholder: "any model" })),
  field("Show", select("limit", [["100", "newest 100"], ["500", "newest 500"], ["2000", "newest 2,000"]], String(f.limit))),
  checkbox("errors_only", "Errors only", f.errors_only),
  h("button.btn.primary", { type: "submit" }, "Apply"));
  const holder = h("div", { id: "requests-table" }, loading());
  load(holder, f, teamName);
  return h("div.page", pageHead("Requests", "The newest requests recorded by every live node, newest first."), form, holder);
}

async function load(holder, f, teamName) {
  let resp;
  try {
    resp = await rpc("SpendService", "SpendLogs", f);
  } catch (e) {
    showError(e);
    return clear(holder, empty(`The request log could not be read: ${e.message}`));
  }
  const recs = resp.records || [];
  const warn = resp.unreachable_nodes?.length
    ? h("div.notice.warn", `Not shown: the records of ${resp.unreachable_nodes.join(", ")} (unreachable).`) : null;
  if (!recs.length) {
    const filtered = f.key_id || f.team_id || f.model || f.errors_only;
    return clear(holder, warn, empty(filtered ? "No request matches these filters." : "No requests yet: send traffic with a key and it shows here."));
  }
  const box = h("div");
  clear(holder, warn, box);
  clientPaged(box, [
    { title: "Time", cell: (r) => h("span", { title: fromUnixNanos(r.unix_nanos).toISOString() }, whenSeconds(fromUnixNanos(r.unix_nanos))) },
    { title: "Status", cell: (r) => badge(String(r.status), r.status >= 500 ? "bad" : r.status >= 400 ? "warn" : "ok") },
    { title: "Model", cell: (r) => h("div", h("div", r.model || r.mcp_tool || "—"), h("div.small.muted", [r.endpoint, r.stream ? "stream" : ""].filter(Boolean).join(" · "))) },
    { title: "Key", cell: (r) => h("span.mono.small", r.key_id || "—") },
    { title: "Team", cell: (r) => (r.team_id ? teamName(r.team_id) : h("span.muted", "—")) },
    { title: "Tokens in / out", cls: "num", cell: (r) => `${count(r.prompt_tokens)} / ${count(r.completion_tokens)}` },
    { title: "Cost", cls: "num", cell: (r) => (r.unpriced ? h("span.muted", "unpriced") : money(r.cost_nanos)) },
    { title: "Latency", cls: "num", cell: (r) => micros(r.latency_micros) },
    { title: "Node", cell: (r) => r.node },
  ], recs, { id: "requests", rowClass: (r) => (r.status >= 400 ? "error-row" : null) });
}
