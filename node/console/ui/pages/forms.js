// Form pieces shared by the key, team and user dialogs: budgets, rate
// limits and model lists, read back into API messages.

import { h, field, input, select, checkbox } from "../ui.js";
import { parseDollars, dollarsInput } from "../format.js";

const periodOptions = [["month", "per month"], ["week", "per week"], ["day", "per day"], ["total", "in total"]];

// budgetFields edits a Budget: an empty amount means none.
export function budgetFields(b) {
  const has = b && b.limit_nanos && b.limit_nanos !== "0";
  return h("div.field-row",
    field("Budget (USD)", input("budget", { placeholder: "none", inputmode: "decimal", value: has ? dollarsInput(b.limit_nanos) : "" })),
    field("Period", select("period", periodOptions, b?.period || "month")));
}

// limitsFields edits RateLimits; empty or 0 is unlimited.
export function limitsFields(l) {
  const v = (x) => (Number(x) ? String(x) : "");
  return h("div.field-row",
    field("Requests / min", input("rpm", { placeholder: "∞", inputmode: "numeric", value: v(l?.rpm) })),
    field("Tokens / min", input("tpm", { placeholder: "∞", inputmode: "numeric", value: v(l?.tpm) })),
    field("Parallel", input("max_parallel", { placeholder: "∞", inputmode: "numeric", value: v(l?.max_parallel) })));
}

export function teamSelect(teams, value, noneLabel = "No team") {
  return select("team_id", [["", noneLabel], ...teams.map((t) => [t.id, t.name || t.id])], value || "");
}

export function allowUnpriced(b) {
  return checkbox("allow_unpriced", "Allow models without a known price", b?.allow_unpriced);
}

// readBudget returns {budget} or {clear: true} from form values; throws on
// a malformed amount.
export function readBudget(v) {
  if (!v.budget) return { clear: true };
  const nanos = parseDollars(v.budget);
  if (nanos === null) throw new Error(`"${v.budget}" is not a dollar amount (e.g. 25 or 12.50).`);
  return { budget: { limit_nanos: nanos, period: v.period || "month", allow_unpriced: !!v.allow_unpriced } };
}

export function readLimits(v) {
  const n = (x, name) => {
    if (!x) return "0";
    if (!/^\d+$/.test(x)) throw new Error(`${name} must be a whole number.`);
    return x;
  };
  return { rpm: n(v.rpm, "Requests / min"), tpm: n(v.tpm, "Tokens / min"), max_parallel: n(v.max_parallel, "Parallel") };
}

export function readList(text) {
  return (text || "").split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
}
