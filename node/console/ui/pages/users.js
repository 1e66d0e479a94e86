// Users: the people and programs that call the admin API, with roles;
// create (token shown once), rotate, revoke.

import { rpc, can } from "../api.js";
import { h, table, empty, pageHead, dialog, confirm, toast, showSecret, field, input, select, formValues, badge, checkbox } from "../ui.js";
import { ago, when } from "../format.js";
import { readList, teamSelect } from "./forms.js";

const roles = [["viewer", "viewer — reads everything but secrets"], ["operator", "operator — keys, teams, models, credentials"],
  ["team-admin", "team-admin — the keys of one team"], ["admin", "admin — everything"]];

export async function usersPage(params, { setParams, reload }) {
  const showRevoked = params.get("revoked") === "1";
  const [users, teams] = await Promise.all([
    rpc("UserService", "ListUsers", { include_revoked: showRevoked }).then((r) => r.users || []),
    rpc("TeamService", "ListTeams", {}).then((r) => r.teams || [], () => []),
  ]);
  const refresh = reload;
  const createBtn = (id) => (can("users.write") ? h("button.btn.primary", { id, onclick: () => createUser(teams, refresh) }, "Create user") : null);
  const toggle = checkbox("show_revoked", "Show revoked", showRevoked);
  toggle.querySelector("input").addEventListener("change", (e) => setParams({ revoked: e.target.checked ? "1" : "" }));
  return h("div.page",
    pageHead("Users", "Who may call the admin API and the console, and with which role.", createBtn("create-user")),
    h("div.toolbar", toggle),
    users.length ? table([
      { title: "User", cell: (u) => h("div.strong", u.name) },
      { title: "Role", cell: (u) => badge(u.role, u.role === "admin" ? "info" : "neutral") },
      { title: "Team", cell: (u) => (u.team_id ? teams.find((t) => t.id === u.team_id)?.name || u.team_id : h("span.muted", "—")) },
      { title: "Token", cell: (u) => h("span.mono", `${u.token_prefix}…`) },
      { title: "Created", cell: (u) => h("span", { title: when(u.created_at) }, `${ago(u.created_at)}${u.created_by ? ` by ${u.created_by}` : ""}`) },
      { title: "Status", cell: (u) => (u.revoked_at ? badge("revoked", "bad") : badge("active", "ok")) },
      { title: "", cls: "actions", cell: (u) => (can("users.write") && !u.revoked_at ? h("div.row-actions",
        h("button.btn.ghost.small", { onclick: () => rotateUser(u, refresh) }, "Rotate token"),
        h("button.btn.ghost.small.danger-text", { onclick: () => revokeUser(u, refresh) }, "Revoke")) : null) },
    ], users, { id: "users", rowClass: (u) => (u.revoked_at ? "revoked" : null) })
      : h("section.card", empty("No users yet — create one so people stop sharing the bootstrap token.", createBtn("create-user-empty"))));
}

function createUser(teams, refresh) {
  const body = h("form.form", { id: "user-form", onsubmit: (e) => e.preventDefault() },
    field("Name", input("name", { placeholder: "e.g. alice@example.com", required: true })),
    field("Role", select("role", roles, "viewer")),
    field("Team", teamSelect(teams, "", "—"), "Only for a team-admin: the team it manages."),
    field("Models", input("models", { placeholder: "any model" }), "Only for a team-admin: models its keys may be given."));
  dialog({
    title: "Create user", body,
    actions: [{ label: "Cancel" }, {
      label: "Create user", kind: "primary", submit: true, id: "create-user-submit",
      onclick: async () => {
        const v = formValues(body);
        if (!v.name) throw new Error("A user needs a name.");
        const resp = await rpc("UserService", "CreateUser", { name: v.name, role: v.role, team_id: v.team_id, models: readList(v.models) });
        refresh();
        showSecret({ title: "User created", label: "Token", secret: resp.token,
          note: `${resp.user.name} (${resp.user.role}) signs in to the console and tollctl with this token.` });
      },
    }],
  });
}

function rotateUser(u, refresh) {
  confirm({
    title: "Rotate token", text: `A new token replaces ${u.name}'s; the old one stops working at once.`, label: "Rotate",
    run: async () => {
      const resp = await rpc("UserService", "RotateUser", { name: u.name });
      refresh();
      showSecret({ title: "New token", label: "Token", secret: resp.token, note: `${u.name}'s new token.` });
    },
  });
}

function revokeUser(u, refresh) {
  confirm({
    title: "Revoke user", text: `${u.name} can no longer call the admin API or sign in. This cannot be undone.`, label: "Revoke", danger: true,
    run: async () => { await rpc("UserService", "RevokeUser", { name: u.name }); toast(`Revoked ${u.name}.`); refresh(); },
  });
}
