// Teams: list with budget use, create, edit budget and limits, delete.

import { rpc, can } from "../api.js";
import { h, table, empty, pageHead, dialog, confirm, toast, field, input, formValues, progress, badge } from "../ui.js";
import { budgetText, limitsText, money, pct, ago, when } from "../format.js";
import { budgetFields, limitsFields, allowUnpriced, readBudget, readLimits } from "./forms.js";

export async function teamsPage(params, { reload }) {
  const teams = (await rpc("TeamService", "ListTeams", {})).teams || [];
  const details = await Promise.all(teams.slice(0, 200).map((t) => rpc("TeamService", "GetTeam", { id: t.id }).catch(() => null)));
  const refresh = reload;
  const createBtn = (id) => (can("teams.write") ? h("button.btn.primary", { id, onclick: () => editTeam(null, refresh) }, "Create team") : null);
  return h("div.page",
    pageHead("Teams", "A team's budget and rate limits are shared by all of its keys.", createBtn("create-team")),
    teams.length ? table([
      { title: "Team", cell: (t) => h("div", h("div.strong", t.name), h("div.mono.small.muted", t.id)) },
      { title: "Keys", cls: "num", cell: (t) => String(detailOf(t).key_ids?.length ?? "—") },
      { title: "Budget", cell: (t) => budgetCell(t, detailOf(t)) },
      { title: "Limits", cell: (t) => limitsText(t.limits) || h("span.muted", "—") },
      { title: "Created", cell: (t) => h("span", { title: when(t.created_at) }, ago(t.created_at)) },
      { title: "", cls: "actions", cell: (t) => (can("teams.write") ? h("div.row-actions",
        h("button.btn.ghost.small", { onclick: () => editTeam(t, refresh) }, "Edit"),
        h("button.btn.ghost.small.danger-text", { onclick: () => deleteTeam(t, refresh) }, "Delete")) : null) },
    ], teams, { id: "teams" }) : h("section.card", empty("No teams yet — create one to share a budget between keys.", createBtn("create-team-empty"))));

  function detailOf(t) { return details[teams.indexOf(t)] || {}; }
}

function budgetCell(t, d) {
  if (!t.budget) return h("span.muted", "—");
  const bs = d.budget_status;
  if (!bs) return budgetText(t.budget);
  const p = pct(bs.spent_nanos, bs.limit_nanos);
  return h("div.budget-cell", h("div", `${money(bs.spent_nanos)} of ${budgetText(t.budget)}`), progress(p),
    p >= 90 ? badge("near limit", "bad") : null);
}

function editTeam(t, refresh) {
  const body = h("form.form", { id: "team-form", onsubmit: (e) => e.preventDefault() },
    field("Name", input("name", { value: t?.name || "", placeholder: "e.g. platform", required: true })),
    budgetFields(t?.budget), allowUnpriced(t?.budget), limitsFields(t?.limits));
  dialog({
    title: t ? `Edit ${t.name}` : "Create team", body,
    actions: [{ label: "Cancel" }, {
      label: t ? "Save" : "Create team", kind: "primary", submit: true, id: "team-submit",
      onclick: async () => {
        const v = formValues(body);
        if (!v.name) throw new Error("A team needs a name.");
        const b = readBudget(v);
        if (t) {
          await rpc("TeamService", "UpdateTeam", { id: t.id, name: v.name, budget: b.budget, clear_budget: !!b.clear && !!t.budget, limits: readLimits(v) });
          toast(`Saved ${v.name}.`);
        } else {
          const resp = await rpc("TeamService", "CreateTeam", { name: v.name, budget: b.budget, limits: readLimits(v) });
          toast(`Created team ${resp.team.name}.`);
        }
        refresh();
      },
    }],
  });
}

function deleteTeam(t, refresh) {
  confirm({
    title: "Delete team", text: `Delete ${t.name}? A team that still has keys cannot be deleted.`, label: "Delete", danger: true,
    run: async () => { await rpc("TeamService", "DeleteTeam", { id: t.id }); toast(`Deleted ${t.name}.`); refresh(); },
  });
}
