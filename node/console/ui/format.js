// Formatting of money (int64 nano-dollar strings), counts, times and
// durations for display, and parsing of dollar amounts typed by people.

const NANOS = 1000000000n;

function big(v) {
  try { return BigInt(v ?? 0); } catch { return 0n; }
}

// dollarsNumber turns nanos into a float for charts (display only).
export function dollarsNumber(nanos) {
  return Number(big(nanos)) / 1e9;
}

// money shows nanos as dollars: cents for amounts of a dollar and more,
// up to six decimals below that so small spend does not read as $0.00.
export function money(nanos) {
  const n = big(nanos);
  const neg = n < 0n;
  const abs = neg ? -n : n;
  const whole = abs / NANOS;
  const frac = (abs % NANOS).toString().padStart(9, "0");
  // Cents, unless that drops digits of an amount under a dollar: then up
  // to six decimals, so small spend does not read as $0.00.
  let decimals = 2;
  while (whole === 0n && decimals < 6 && /[1-9]/.test(frac.slice(decimals))) decimals += 2;
  const wholeText = whole.toLocaleString("en-US");
  return `${neg ? "-" : ""}$${wholeText}.${frac.slice(0, decimals)}`;
}

// moneyShort is for chart axes: $1.2k, $35, $0.004.
export function moneyShort(dollars) {
  const a = Math.abs(dollars);
  if (a >= 1e6) return `$${(dollars / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `$${(dollars / 1e3).toFixed(1)}k`;
  if (a >= 1 || a === 0) return `$${+dollars.toFixed(2)}`;
  return `$${+dollars.toPrecision(2)}`;
}

// parseDollars turns "12.50" into a nanos string, exactly; null when it is
// not an amount.
export function parseDollars(text) {
  const m = String(text).trim().replace(/^\$/, "").replace(/,/g, "").match(/^(\d+)(?:\.(\d{0,9}))?$/);
  if (!m) return null;
  return (BigInt(m[1]) * NANOS + BigInt((m[2] || "").padEnd(9, "0"))).toString();
}

// dollarsInput shows nanos in an input field: "12.5".
export function dollarsInput(nanos) {
  const n = big(nanos);
  const frac = (n % NANOS).toString().padStart(9, "0").replace(/0+$/, "");
  return `${n / NANOS}${frac ? "." + frac : ""}`;
}

export function count(v) {
  return Number(v ?? 0).toLocaleString("en-US");
}

export function countShort(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toFixed(0)}k`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return String(+v.toFixed(2));
}

export function pct(part, whole) {
  const w = Number(whole);
  return w > 0 ? Math.min(999, (Number(part) / w) * 100) : 0;
}

function toDate(t) {
  if (!t) return null;
  const d = t instanceof Date ? t : new Date(t);
  return isNaN(d) || d.getTime() <= 0 ? null : d;
}

// when shows a timestamp as "2026-12-01 14:03" in the browser's zone.
export function when(t) {
  const d = toDate(t);
  if (!d) return "—";
  const p = (x) => String(x).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

// whenSeconds shows "14:03:27" for today and "12-01 14:03:27" before.
export function whenSeconds(t) {
  const d = toDate(t);
  if (!d) return "—";
  const p = (x) => String(x).padStart(2, "0");
  const time = `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  return d.toDateString() === new Date().toDateString() ? time : `${p(d.getMonth() + 1)}-${p(d.getDate())} ${time}`;
}

// ago shows how long ago t was: "just now", "5 min ago", "3 h ago", "2 d ago".
export function ago(t) {
  const d = toDate(t);
  if (!d) return "—";
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < 0) return "in " + span(-s);
  if (s < 45) return "just now";
  return span(s) + " ago";
}

function span(s) {
  if (s < 3600) return `${Math.max(1, Math.round(s / 60))} min`;
  if (s < 86400) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

// fromUnixNanos turns an int64 nanos string into a Date.
export function fromUnixNanos(n) {
  return new Date(Number(big(n) / 1000000n));
}

export function micros(v) {
  const us = Number(v ?? 0);
  if (us >= 1e6) return `${(us / 1e6).toFixed(2)} s`;
  return `${Math.round(us / 1000)} ms`;
}

export const periods = { day: "per day", week: "per week", month: "per month", total: "in total" };

// budgetText shows a Budget message: "$50.00 per month".
export function budgetText(b) {
  if (!b || !b.limit_nanos || b.limit_nanos === "0") return "";
  return `${money(b.limit_nanos)} ${periods[b.period] || b.period || ""}`.trim();
}

// limitsText shows RateLimits: "60 rpm · 10k tpm · 4 parallel".
export function limitsText(l) {
  if (!l) return "";
  const parts = [];
  if (Number(l.rpm)) parts.push(`${countShort(Number(l.rpm))} rpm`);
  if (Number(l.tpm)) parts.push(`${countShort(Number(l.tpm))} tpm`);
  if (Number(l.max_parallel)) parts.push(`${count(l.max_parallel)} parallel`);
  return parts.join(" · ");
}

export function nowUnix() {
  return Math.floor(Date.now() / 1000);
}
