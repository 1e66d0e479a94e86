// Small DOM toolkit: elements, toasts, dialogs, tables with paging, empty
// and loading states, and form fields.

// h builds an element: h("a.btn.primary", {href: "#/"}, "text", child, ...).
// Attributes starting with "on" become listeners; children that are null,
// false or undefined are left out; strings become text (never HTML).
export function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className += (el.className ? " " : "") + v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "style") el.style.cssText = v; // CSSOM: allowed by the console's CSP, a style attribute is not
    else if (k in el && typeof v !== "string") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// toast shows a message for a few seconds; kind "error" keeps it longer.
export function toast(message, kind = "info") {
  let box = document.getElementById("toasts");
  if (!box) box = document.body.appendChild(h("div", { id: "toasts", role: "status", "aria-live": "polite" }));
  const t = h(`div.toast.${kind}`, h("span", message),
    h("button.toast-close", { "aria-label": "Dismiss", onclick: () => t.remove() }, "×"));
  box.append(t);
  setTimeout(() => t.remove(), kind === "error" ? 9000 : 4000);
}

// showError toasts what went wrong, with the API's message.
export function showError(err, what) {
  const msg = err?.message || String(err);
  toast(what ? `${what}: ${msg}` : msg, "error");
}

// dialog opens a modal; actions are [{label, kind, onclick}] where onclick
// may return a promise; a resolved value other than false closes it.
export function dialog({ title, body, actions = [], wide = false, onclose }) {
  const closeBtn = h("button.icon-btn", { "aria-label": "Close", onclick: () => close() }, "×");
  const foot = h("div.dialog-foot");
  const box = h(`div.dialog${wide ? ".wide" : ""}`, { role: "dialog", "aria-modal": "true", "aria-label": title },
    h("div.dialog-head", h("h2", title), closeBtn), h("div.dialog-body", body), foot);
  const back = h("div.backdrop", { onmousedown: (e) => { if (e.target === back) close(); } }, box);
  const onKey = (e) => { if (e.key === "Escape") close(); };
  function close() {
    back.remove();
    document.removeEventListener("keydown", onKey);
    onclose?.();
  }
  for (const a of actions) {
    const b = h(`button.btn.${a.kind || "secondary"}`, { type: a.submit ? "submit" : "button", id: a.id || null }, a.label);
    b.addEventListener("click", async () => {
      if (!a.onclick) return close();
      b.disabled = true;
      try {
        if ((await a.onclick()) !== false) close();
      } catch (err) {
        showError(err);
      } finally {
        b.disabled = false;
      }
    });
    foot.append(b);
  }
  document.addEventListener("keydown", onKey);
  document.body.append(back);
  (box.querySelector("input:not([type=checkbox]),select,textarea") || foot.lastChild || closeBtn).focus();
  return { close, box };
}

// confirm asks a yes/no question; resolves true when confirmed after run()
// succeeded.
export function confirm({ title, text, label = "Confirm", danger = false, run }) {
  return new Promise((resolve) => {
    let done = false;
    dialog({
      title,
      body: h("p", text),
      onclose: () => { if (!done) resolve(false); },
      actions: [
        { label: "Cancel" },
        { label, id: "confirm-ok", kind: danger ? "danger" : "primary", onclick: async () => { await run(); done = true; resolve(true); } },
      ],
    });
  });
}

// showSecret shows a secret once, with a copy button.
export function showSecret({ title, label, secret, note }) {
  const input = h("input.secret", { readonly: true, value: secret, "aria-label": label, id: "secret-value" });
  const copy = h("button.btn.secondary", { type: "button", id: "copy-secret" }, "Copy");
  copy.addEventListener("click", async () => {
    input.select();
    try {
      await navigator.clipboard.writeText(secret);
    } catch {
      document.execCommand("copy");
    }
    copy.textContent = "Copied";
  });
  dialog({
    title,
    body: [h("p", note), h("label.field-label", label), h("div.secret-row", input, copy),
      h("p.warn", "Copy it now: you will not see it again.")],
    actions: [{ label: "Done", kind: "primary", id: "secret-done" }],
  });
}

export function badge(text, kind = "neutral") {
  return h(`span.badge.${kind}`, text);
}

export function loading(text = "Loading…") {
  return h("div.loading", h("span.spinner"), h("span", text));
}

// empty is the state of a list with nothing in it, with an optional action.
export function empty(text, action) {
  return h("div.empty", h("div.empty-icon", "∅"), h("p", text), action || null);
}

export function card(title, ...children) {
  return h("section.card", title ? h("h3.card-title", title) : null, ...children);
}

export function stat(label, value, sub, id) {
  return h("div.stat", { id }, h("div.stat-label", label), h("div.stat-value", value), sub ? h("div.stat-sub", sub) : null);
}

// table renders rows with columns [{title, cell(row) -> node|string, cls}].
export function table(columns, rows, { id, rowClass } = {}) {
  return h("div.table-wrap", h("table.data", { id },
    h("thead", h("tr", columns.map((c) => h("th", { class: c.cls || null }, c.title)))),
    h("tbody", rows.map((r) => h("tr", { class: rowClass?.(r) || null },
      columns.map((c) => h("td", { class: c.cls || null }, c.cell(r))))))));
}

// pager shows "first–last of total" with previous and next buttons.
export function pager({ from, to, total, onPrev, onNext }) {
  return h("div.pager",
    h("span.pager-info", total === undefined ? `${from}–${to}` : `${from.toLocaleString("en-US")}–${to.toLocaleString("en-US")} of ${Number(total).toLocaleString("en-US")}`),
    h("button.btn.secondary.small", { disabled: !onPrev, onclick: onPrev, "aria-label": "Previous page" }, "‹ Prev"),
    h("button.btn.secondary.small", { disabled: !onNext, onclick: onNext, "aria-label": "Next page" }, "Next ›"));
}

// clientPaged shows rows a page at a time within holder.
export function clientPaged(holder, columns, rows, opts = {}) {
  const size = opts.pageSize || 50;
  let page = 0;
  const render = () => {
    const start = page * size;
    const slice = rows.slice(start, start + size);
    clear(holder, table(columns, slice, opts), rows.length > size ? pager({
      from: start + 1, to: start + slice.length, total: rows.length,
      onPrev: page > 0 ? () => { page--; render(); } : null,
      onNext: start + size < rows.length ? () => { page++; render(); } : null,
    }) : null);
  };
  render();
}

// field wraps an input with its label and an optional hint.
export function field(label, input, hint) {
  return h("label.field", h("span.field-label", label), input, hint ? h("span.field-hint", hint) : null);
}

export function input(name, attrs = {}) {
  return h("input", { name, id: `f-${name}`, autocomplete: "off", ...attrs });
}

export function select(name, options, value) {
  return h("select", { name, id: `f-${name}` },
    options.map(([v, label]) => h("option", { value: v, selected: v === value }, label)));
}

export function checkbox(name, label, checked) {
  return h("label.check", h("input", { type: "checkbox", name, id: `f-${name}`, checked: !!checked }), h("span", label));
}

// formValues reads the named fields of a container.
export function formValues(root) {
  const out = {};
  for (const el of root.querySelectorAll("input[name],select[name],textarea[name]")) {
    out[el.name] = el.type === "checkbox" ? el.checked : el.value.trim();
  }
  return out;
}

// debounce delays fn until ms passed without another call.
export function debounce(fn, ms) {
  let t;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

// progress is a bar for used/limit, red from 90 %, amber from 75 %.
export function progress(percent) {
  const p = Math.max(0, Math.min(100, percent));
  const kind = percent >= 90 ? "bad" : percent >= 75 ? "warn" : "ok";
  return h("div.progress", { title: `${percent.toFixed(1)} %` }, h(`div.progress-fill.${kind}`, { style: `width:${p}%` }));
}

// pageHead is a page's title row with its actions on the right.
export function pageHead(title, subtitle, ...actions) {
  return h("div.page-head", h("div", h("h1", title), subtitle ? h("p.muted", subtitle) : null),
    h("div.page-actions", ...actions));
}
