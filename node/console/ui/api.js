// The console's HTTP API: session, RPC calls through the admin service, and
// errors carrying the API's own message.

export const state = { config: { oidc: false, node: "" }, session: null, perms: new Set() };

// ApiError is a refused or failed call; message is the API's own text.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || "";
  }
}

async function errorOf(resp) {
  let code = "", message = "";
  try {
    const body = await resp.json();
    code = body?.error?.code || "";
    message = body?.error?.message || "";
  } catch { /* not JSON: keep the status line */ }
  return new ApiError(resp.status, code, message || `${resp.status} ${resp.statusText}`);
}

// onUnauthenticated is called when a call finds the session gone.
let onUnauthenticated = () => {};
export function setUnauthenticatedHandler(fn) { onUnauthenticated = fn; }

async function send(url, init) {
  let resp;
  try {
    resp = await fetch(url, { credentials: "same-origin", ...init });
  } catch (e) {
    throw new ApiError(0, "Unavailable", `The node did not answer (${e.message}).`);
  }
  if (!resp.ok) {
    const err = await errorOf(resp);
    if (resp.status === 401 && state.session && !url.endsWith("/api/login")) {
      state.session = null;
      onUnauthenticated(err);
    }
    throw err;
  }
  if (resp.status === 204) return null;
  return resp.json();
}

export function getJSON(url) {
  return send(url, { method: "GET", headers: { Accept: "application/json" } });
}

function post(url, body) {
  return send(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": state.session?.csrf || "" },
    body: JSON.stringify(body ?? {}),
  });
}

// rpc calls a method of a public admin service, e.g. rpc("KeyService",
// "ListKeys", {page_size: 50}); int64 fields come back as strings.
export function rpc(service, method, req = {}) {
  return post(`/api/rpc/tollgate.v1.${service}/${method}`, req);
}

export async function login(token) {
  state.session = await post("/api/login", { token });
  await loadPermissions();
  return state.session;
}

// logout ends the session. It returns the API's message when the logout
// was recorded but some node had not applied it yet (that node still takes
// a copy of the cookie until it catches up), else "".
export async function logout() {
  try {
    return (await post("/api/logout", {}))?.message || "";
  } finally { state.session = null; state.perms = new Set(); }
}

// restore picks up an existing session cookie; false when there is none.
export async function restore() {
  try {
    state.session = await getJSON("/api/session");
  } catch (e) {
    if (e.status === 401) return false;
    throw e;
  }
  await loadPermissions();
  return true;
}

export async function loadConfig() {
  state.config = await getJSON("/api/config");
}

// Role permissions as node/admin/roles.go grants them; WhoAmI's answer wins
// when it is available.
const readOnly = ["keys.read", "teams.read", "models.read", "credentials.read", "spend.read",
  "cluster.read", "audit.read", "mcp.read"];
const byRole = {
  viewer: readOnly,
  operator: [...readOnly, "keys.write", "teams.write", "models.write", "credentials.write"],
  "team-admin": ["keys.read", "keys.write", "teams.read", "models.read", "spend.read"],
};

// loadPermissions asks WhoAmI once per session; the answer is kept in
// sessionStorage under the session's CSRF token, so reloads skip the call.
async function loadPermissions() {
  const s = state.session || {};
  const cacheKey = `tollgate.perms.${s.csrf}`;
  let perms = JSON.parse(sessionStorage.getItem(cacheKey) || "null");
  if (!perms) {
    try {
      perms = (await rpc("UserService", "WhoAmI", {})).permissions || [];
      sessionStorage.setItem(cacheKey, JSON.stringify(perms));
    } catch {
      perms = byRole[s.role] || [];
    }
  }
  state.perms = new Set(perms);
  if (s.role === "admin") state.perms.add("*");
}

// can tells whether the signed-in user's role grants a permission.
export function can(perm) {
  return state.perms.has("*") || state.perms.has(perm);
}
