// Audit log: every admin write, newest first, filtered by user and time.

import { rpc } from "../api.js";
import { h, clientPaged, empty, pageHead, badge, field, input, select, formValues, clear, loading, showError } from "../ui.js";
import { whenSeconds, nowUnix } from "../format.js";

const sinceOptions = [["3600", "Last hour"], ["86400", "Last 24 hours"], ["604800", "Last 7 days"], ["2592000", "Last 30 days"], ["0", "Everything kept"]];

export async function auditPage(params, { setParams }) {
  const user = params.get("user") || "";
  const since = sinceOptions.some(([v]) => v === params.get("since")) ? params.get("since") : "604800";
  const form = h("form.toolbar.filters", { id: "audit-filters", onsubmit: (e) => {
    e.preventDefault();
    const v = formValues(form);
    setParams({ user: v.user, since: v.since === "604800" ? "" : v.since });
  } },
  field("User", input("user", { value: user, placeholder: "everyone" })),
  field("Since", select("since", sinceOptions, since)),
  h("button.btn.primary", { type: "submit" }, "Apply"));
  const holder = h("div", { id: "audit-table" }, loading());
  const req = { user, since: since === "0" ? 0 : nowUnix() - Number(since), limit: 2000 };
  rpc("AuditService", "ListAudit", req).then((resp) => show(holder, resp.records || [], user), (e) => {
    showError(e);
    clear(holder, empty(`The audit log could not be read: ${e.message}`));
  });
  return h("div.page", pageHead("Audit log", "Every admin write: who, when, from where and what changed (secrets left out)."), form, holder);
}

function show(holder, recs, user) {
  if (!recs.length) return clear(holder, empty(user ? `No writes by ${user} in this period.` : "No admin writes in this period."));
  const box = h("div");
  clear(holder, box);
  clientPaged(box, [
    { title: "Time", cell: (r) => h("span", { title: `Raft index ${r.index}` }, whenSeconds(r.time)) },
    { title: "User", cell: (r) => h("div", h("div.strong", r.user), h("div.small.muted", r.role)) },
    { title: "Action", cell: (r) => h("div", h("div", { class: "audit-command" }, r.command), h("div.small.muted.mono", r.rpc.replace(/^\/tollgate\.v1\./, ""))) },
    { title: "Summary", cell: (r) => h("span.summary", { title: r.summary }, readable(r.summary) || "—") },
    { title: "Result", cell: (r) => (r.error ? h("span", { title: r.error }, badge("failed", "bad")) : badge("applied", "ok")) },
    { title: "Address", cell: (r) => h("span.mono.small", r.address || "—") },
  ], recs, { id: "audit" });
}

// readable turns the record's text form ({team:{id:"t" name:"x"}}) into
// "team: id: t name: x" for the table; the full text is the cell's title.
function readable(summary) {
  return (summary || "").replace(/[{}[\]]/g, " ").replace(/"([^"]*)"/g, "$1").replace(/\s+/g, " ").trim()
    .replace(/^(\w+): \1:/, "$1:").replace(/:(?=\S)/g, ": ");
}
