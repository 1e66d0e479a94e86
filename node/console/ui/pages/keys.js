// Keys: a server-paged, searchable list (ListKeys page_size/page_token/
// query), and create, rotate, revoke and edit (limits, budget, models).

import { rpc, can } from "../api.js";
import { h, clear, table, pager, empty, loading, badge, dialog, confirm, showSecret, showError, toast,
  field, input, formValues, debounce, pageHead, checkbox, progress } from "../ui.js";
import { budgetText, limitsText, when, money, pct } from "../format.js";
import { budgetFields, limitsFields, teamSelect, allowUnpriced, readBudget, readLimits, readList } from "./forms.js";

const PAGE = 50;

export async function keysPage(params) {
  // The first page is asked for at once, with the teams, not after them.
  const first = rpc("KeyService", "ListKeys", { page_size: PAGE, page_token: "", query: params.get("q") || "", include_revoked: false });
  first.catch(() => {});
  const teams = (await rpc("TeamService", "ListTeams", {}).catch(() => ({ teams: [] }))).teams || [];
  const byId = new Map(teams.map((t) => [t.id, t.name]));
  const teamName = (id) => byId.get(id) || id;
  const st = { query: params.get("q") || "", revoked: false, tokens: [""], index: 0 };
  const holder = h("div.table-holder", { id: "keys-table" }, loading());

  async function load(pending) {
    const seq = (st.seq = (st.seq || 0) + 1);
    holder.classList.add("busy");
    try {
      const resp = await (pending || rpc("KeyService", "ListKeys", { page_size: PAGE, page_token: st.tokens[st.index],
        query: st.query, include_revoked: st.revoked }));
      if (seq === st.seq) show(resp);
    } catch (e) {
      if (seq === st.seq) { clear(holder, empty(`The keys could not be listed: ${e.message}`)); showError(e); }
    } finally {
      holder.classList.remove("busy");
    }
  }

  function show(resp) {
    const keys = resp.keys || [];
    const total = Number(resp.total || keys.length);
    if (!keys.length) {
      const none = st.query ? `No key matches “${st.query}”.` : "No keys yet — create one.";
      return clear(holder, empty(none, !st.query && can("keys.write") ? createButton("create-key-empty") : null));
    }
    performance.mark("keys-table");
    const from = st.index * PAGE + 1;
    clear(holder, table(columns(teamName, load), keys, { id: "keys", rowClass: (k) => (k.revoked_at ? "revoked" : null) }),
      pager({ from, to: from + keys.length - 1, total,
        onPrev: st.index > 0 ? () => { st.index--; load(); } : null,
        onNext: resp.next_page_token ? () => { st.tokens[st.index + 1] = resp.next_page_token; st.index++; load(); } : null }));
  }

  const createButton = (id = "create-key") => h("button.btn.primary", { id, onclick: () => createKey(teams, load) }, "Create key");
  const search = h("input.search", { type: "search", id: "key-search", placeholder: "Search by name or id", value: st.query,
    "aria-label": "Search keys",
    oninput: debounce(() => { st.query = search.value.trim(); st.tokens = [""]; st.index = 0; load(); }, 250) });
  const revoked = checkbox("include_revoked", "Show revoked", false);
  revoked.querySelector("input").addEventListener("change", (e) => { st.revoked = e.target.checked; st.tokens = [""]; st.index = 0; load(); });
  load(first);
  return h("div.page",
    pageHead("Keys", "Virtual API keys: each with its own models, rate limits and budget.", can("keys.write") ? createButton() : null),
    h("div.toolbar", searchBox(search), revoked), holder);
}

function columns(teamName, reload) {
  return [
    { title: "Name", cell: (k) => h("div", h("div.strong", k.name || "(unnamed)"),
      h("div.mono.small.muted", { title: "id · start of the secret" }, `${k.id} · ${k.secret_prefix}…`)) },
    { title: "Team", cell: (k) => (k.team_id ? teamName(k.team_id) : h("span.muted", "—")) },
    { title: "Models", cell: (k) => (k.models?.length ? k.models.join(", ") : h("span.muted", "all")) },
    { title: "Budget", cell: (k) => budgetText(k.budget) || h("span.muted", "—") },
    { title: "Limits", cell: (k) => limitsText(k.limits) || h("span.muted", "—") },
    { title: "Status", cell: (k) => h("span", { title: `Created ${when(k.created_at)}` }, status(k)) },
    { title: "", cls: "actions", cell: (k) => actions(k, reload) },
  ];
}

function status(k) {
  if (k.revoked_at) return badge("revoked", "bad");
  if (k.expires_at && new Date(k.expires_at) < new Date()) return badge("expired", "warn");
  return badge("active", "ok");
}

function actions(k, reload) {
  if (!can("keys.write") || k.revoked_at) return h("button.btn.ghost.small", { onclick: () => details(k) }, "Details");
  return h("div.row-actions",
    h("button.btn.ghost.small", { onclick: () => editKey(k, reload), "data-action": "edit" }, "Edit"),
    h("button.btn.ghost.small", { onclick: () => rotateKey(k, reload), "data-action": "rotate" }, "Rotate"),
    h("button.btn.ghost.small.danger-text", { onclick: () => revokeKey(k, reload), "data-action": "revoke", "data-key": k.id }, "Revoke"));
}

function createKey(teams, reload) {
  const body = h("form.form", { id: "create-key-form", onsubmit: (e) => e.preventDefault() },
    field("Name", input("name", { placeholder: "e.g. billing-service", required: true })),
    field("Team", teamSelect(teams, "")),
    field("Models", input("models", { placeholder: "all models" }), "Route names or patterns such as claude-*, separated by commas."),
    budgetFields(null), allowUnpriced(null), limitsFields(null));
  dialog({
    title: "Create key", body,
    actions: [{ label: "Cancel" }, {
      label: "Create key", kind: "primary", submit: true, id: "create-key-submit",
      onclick: async () => {
        const v = formValues(body);
        if (!v.name) throw new Error("A key needs a name.");
        const b = readBudget(v);
        const resp = await rpc("KeyService", "CreateKey", { name: v.name, team_id: v.team_id, models: readList(v.models),
          budget: b.budget, limits: readLimits(v) });
        reload();
        showSecret({ title: "Key created", label: "Secret", secret: resp.secret,
          note: `The key ${resp.key.name} (${resp.key.id}) is ready. Clients send this secret as their API key.` });
      },
    }],
  });
}

async function editKey(k, reload) {
  let detail = {};
  try { detail = await rpc("KeyService", "GetKey", { id: k.id }); } catch (e) { showError(e); }
  const body = h("form.form", { onsubmit: (e) => e.preventDefault() },
    budgetUse(detail.budget_status, "This key's budget"), budgetUse(detail.team_budget_status, "Its team's budget"),
    field("Models", input("models", { value: (k.models || []).join(", "), placeholder: "all models" })),
    budgetFields(k.budget), allowUnpriced(k.budget), limitsFields(k.limits));
  dialog({
    title: `Edit ${k.name || k.id}`, body,
    actions: [{ label: "Cancel" }, {
      label: "Save", kind: "primary", submit: true,
      onclick: async () => {
        const v = formValues(body);
        const b = readBudget(v);
        await rpc("KeyService", "UpdateKey", { id: k.id, models: { values: readList(v.models) }, limits: readLimits(v),
          budget: b.budget, clear_budget: !!b.clear && !!k.budget });
        toast(`Saved ${k.name || k.id}.`);
        reload();
      },
    }],
  });
}

// budgetUse shows a BudgetStatus as spent of limit with a bar.
export function budgetUse(bs, label) {
  if (!bs) return null;
  const p = pct(bs.spent_nanos, bs.limit_nanos);
  return h("div.budget-use", h("div.budget-use-head", h("span", label), h("span", `${money(bs.spent_nanos)} of ${money(bs.limit_nanos)} (${p.toFixed(0)} %)`)),
    progress(p));
}

async function details(k) {
  let detail = {};
  try { detail = await rpc("KeyService", "GetKey", { id: k.id }); } catch (e) { showError(e); }
  dialog({
    title: k.name || k.id,
    body: [h("dl.props",
      h("dt", "Id"), h("dd.mono", k.id), h("dt", "Secret"), h("dd.mono", `${k.secret_prefix}…`),
      h("dt", "Models"), h("dd", k.models?.length ? k.models.join(", ") : "all"),
      h("dt", "Budget"), h("dd", budgetText(k.budget) || "—"), h("dt", "Limits"), h("dd", limitsText(k.limits) || "—"),
      h("dt", "Created"), h("dd", when(k.created_at)), h("dt", "Revoked"), h("dd", when(k.revoked_at))),
    budgetUse(detail.budget_status, "Budget"), budgetUse(detail.team_budget_status, "Team budget")],
    actions: [{ label: "Close", kind: "primary" }],
  });
}

function rotateKey(k, reload) {
  confirm({
    title: "Rotate key",
    text: `A new secret replaces the secret of ${k.name || k.id}; the old one stops working at once.`,
    label: "Rotate",
    run: async () => {
      const resp = await rpc("KeyService", "RotateKey", { id: k.id });
      reload();
      showSecret({ title: "New secret", label: "Secret", secret: resp.secret, note: `The key ${k.name || k.id} has a new secret.` });
    },
  });
}

function revokeKey(k, reload) {
  confirm({
    title: "Revoke key",
    text: `Requests with ${k.name || k.id} are refused from now on, on every node. This cannot be undone.`,
    label: "Revoke", danger: true,
    run: async () => {
      await rpc("KeyService", "RevokeKey", { id: k.id });
      toast(`Revoked ${k.name || k.id}.`);
      reload();
    },
  }).catch(showError);
}

// searchBox puts a magnifier (inline SVG: the CSP allows no data: image) in
// front of the search field.
function searchBox(input) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("aria-hidden", "true");
  const c = document.createElementNS(ns, "circle");
  c.setAttribute("cx", "7"); c.setAttribute("cy", "7"); c.setAttribute("r", "5");
  const p = document.createElementNS(ns, "path");
  p.setAttribute("d", "m11 11 4 4");
  svg.append(c, p);
  return h("span.search-box", svg, input);
}
