// Tollgate console: the shell (navigation, header, sign-in) and the hash
// router that renders one page at a time.

import { state, login, logout, restore, loadConfig, can, setUnauthenticatedHandler } from "./api.js";
import { h, clear, showError, toast, loading } from "./ui.js";
import { overviewPage } from "./pages/overview.js";
import { keysPage } from "./pages/keys.js";
import { teamsPage } from "./pages/teams.js";
import { modelsPage } from "./pages/models.js";
import { spendPage } from "./pages/spend.js";
import { requestsPage } from "./pages/requests.js";
import { auditPage } from "./pages/audit.js";
import { usersPage } from "./pages/users.js";

// routes in navigation order; perm is what the page needs to be listed.
const routes = [
  { path: "overview", title: "Overview", perm: null, render: overviewPage },
  { path: "keys", title: "Keys", perm: "keys.read", render: keysPage },
  { path: "teams", title: "Teams", perm: "teams.read", render: teamsPage },
  { path: "models", title: "Models", perm: "models.read", render: modelsPage },
  { path: "spend", title: "Spend", perm: "spend.read", render: spendPage },
  { path: "requests", title: "Requests", perm: "spend.read", render: requestsPage },
  { path: "audit", title: "Audit log", perm: "audit.read", render: auditPage },
  { path: "users", title: "Users", perm: "users.read", render: usersPage },
];

// icons are 24×24 stroke paths (drawn here, no icon font).
const icons = {
  overview: "M3 3h7v7H3zM14 3h7v7h-7zM3 14h7v7H3zM14 14h7v7h-7z",
  keys: "M21 2l-2 2m-7.6 7.6a5.5 5.5 0 1 1-7.8 7.8 5.5 5.5 0 0 1 7.8-7.8zm0 0L15.5 7.5m0 0 3 3L22 7l-3-3m-3.5 3.5L19 4",
  teams: "M17 21v-2a4 4 0 0 0-4-4H5a4 4 0 0 0-4 4v2M13 7a4 4 0 1 1-8 0 4 4 0 0 1 8 0zM23 21v-2a4 4 0 0 0-3-3.87M16 3.13a4 4 0 0 1 0 7.75",
  models: "M12 2 2 7l10 5 10-5-10-5zM2 17l10 5 10-5M2 12l10 5 10-5",
  spend: "M12 1v22M17 5H9.5a3.5 3.5 0 0 0 0 7h5a3.5 3.5 0 0 1 0 7H6",
  requests: "M8 6h13M8 12h13M8 18h13M3 6h.01M3 12h.01M3 18h.01",
  audit: "M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8zM14 2v6h6M16 13H8M16 17H8",
  users: "M12 22s8-4 8-10V5l-8-3-8 3v7c0 6 8 10 8 10z",
};

function icon(name) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", "nav-icon");
  svg.setAttribute("aria-hidden", "true");
  const p = document.createElementNS("http://www.w3.org/2000/svg", "path");
  p.setAttribute("d", icons[name]);
  svg.append(p);
  return svg;
}

const root = document.getElementById("app");
let renderSeq = 0;

// parseHash splits "#/keys?q=x" into the route and its parameters.
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?");
  return { path: path || "overview", params: new URLSearchParams(query) };
}

// navigate changes the hash parameters of the current page.
export function setParams(params) {
  const { path } = parseHash();
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined && v !== false));
  const next = `#/${path}${q.toString() ? "?" + q : ""}`;
  if (location.hash !== next) location.hash = next;
}

// signOutNotice is what the last sign-out had to say (a node that had not
// applied it yet, or a sign-out the cluster could not record): the login
// page shows it until the next sign-in.
let signOutNotice = "";

function loginView(message) {
  const tokenInput = h("input", { type: "password", id: "login-token", name: "token", autocomplete: "current-password",
    placeholder: "tgu-… user token or the bootstrap token", required: true });
  const err = h("p.login-error", { id: "login-error", role: "alert" }, message || "");
  const submit = h("button.btn.primary.block", { type: "submit", id: "login-submit" }, "Sign in");
  const form = h("form.login-form", {
    onsubmit: async (e) => {
      e.preventDefault();
      submit.disabled = true;
      err.textContent = "";
      try {
        await login(tokenInput.value.trim());
        signOutNotice = "";
        if (!location.hash || location.hash === "#/login") location.hash = "#/overview";
        render();
      } catch (ex) {
        err.textContent = ex.message;
      } finally {
        submit.disabled = false;
      }
    },
  }, h("label.field", h("span.field-label", "Admin token"), tokenInput), submit);
  const sso = state.config.oidc
    ? [h("div.divider", h("span", "or")), h("a.btn.secondary.block", { href: "/api/oidc/login", id: "login-sso" }, "Sign in with SSO")]
    : null;
  clear(root, h("div.login-page", h("div.login-card",
    h("div.brand.big", h("span.logo", "T"), h("span", "Tollgate")),
    h("p.muted", `Sign in to the console of node ${state.config.node || "—"}.`),
    h("p.login-notice", { id: "login-notice", role: "status" }, signOutNotice),
    err, form, sso,
    h("p.fine", "Use your user token (tollctl user create) or single sign-on."))));
  tokenInput.focus();
}

function shell(active) {
  const nav = h("nav.nav", { "aria-label": "Pages" }, routes.filter((r) => !r.perm || can(r.perm)).map((r) =>
    h(`a.nav-link${r.path === active ? ".active" : ""}`, { href: `#/${r.path}`, id: `nav-${r.path}` },
      icon(r.path), h("span", r.title))));
  const s = state.session;
  const signOut = h("button.btn.ghost.small", {
    id: "sign-out",
    onclick: async () => {
      try { signOutNotice = await logout(); } catch (e) { signOutNotice = `Sign-out: ${e.message}`; }
      location.hash = "#/login";
      render();
    },
  }, "Sign out");
  const main = h("main.main", { id: "main" });
  clear(root, h("div.layout",
    h("aside.sidebar", h("div.brand", h("span.logo", "T"), h("span", "Tollgate")), nav,
      h("div.sidebar-foot", "Console")),
    h("div.content",
      h("header.topbar",
        h("div.topbar-node", h("span.dot.ok"), "Node ", h("strong", { id: "header-node" }, state.config.node || "—")),
        h("div.topbar-user", h("span.avatar", (s.user || "?").slice(0, 1).toUpperCase()),
          h("span", { id: "header-user" }, s.user), h("span.role-badge", { id: "header-role" }, s.role + (s.team_id ? ` · ${s.team_id}` : "")),
          signOut)),
      main)));
  return main;
}

async function render() {
  const seq = ++renderSeq;
  if (!state.session) return loginView();
  const { path, params } = parseHash();
  if (path === "login") { location.hash = "#/overview"; return; }
  const route = routes.find((r) => r.path === path) || routes[0];
  const main = shell(route.path);
  document.title = `${route.title} · Tollgate`;
  if (route.perm && !can(route.perm)) {
    clear(main, h("div.page-head", h("h1", route.title)),
      h("div.empty", h("p", `Your role (${state.session.role}) cannot see this page.`)));
    return;
  }
  clear(main, loading());
  try {
    const page = await route.render(params, { setParams, reload: () => render() });
    if (seq === renderSeq) {
      clear(main, page);
      performance.mark(`rendered:${route.path}`);
    }
  } catch (e) {
    if (seq !== renderSeq) return;
    clear(main, h("div.page-head", h("h1", route.title)), h("div.empty", h("p", `This page could not be loaded: ${e.message}`)));
    showError(e);
  }
}

setUnauthenticatedHandler(() => {
  toast("Your session has ended: please sign in again.", "error");
  render();
});

window.addEventListener("hashchange", () => render());

async function boot() {
  try {
    await Promise.all([loadConfig(), restore()]);
  } catch (e) {
    clear(root, h("div.login-page", h("div.login-card", h("h2", "The console is unavailable"), h("p", e.message))));
    return;
  }
  const params = new URLSearchParams(location.search);
  if (params.get("error")) loginView(params.get("error"));
  else render();
}

boot();
