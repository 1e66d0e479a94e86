package proxy

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/node/telemetry"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// A span's attributes are kept as a record of typed fields, copied from
// the request when the span ends. The gateway's own tracer (package
// telemetry) takes the record as it is and its exporter writes the
// attributes to OTLP from it in the background: no attribute values built
// nor copied on the request's path. Any other tracer gets them as a list.

// outcome is what an answer came to: the server span and the attempt
// that answered share it.
type outcome struct {
	status int
	model  string
	finish []string
	usage  routing.Usage
}

func outcomeOf(rec *Record) outcome {
	return outcome{status: rec.Status, model: rec.tw.model, finish: rec.tw.finish, usage: rec.Usage}
}

// write writes the answer's status, model, usage and finish reasons.
func (o *outcome) write(w telemetry.AttrWriter) {
	w.Int("http.response.status_code", int64(o.status))
	if o.model != "" {
		w.String("gen_ai.response.model", o.model)
	}
	if len(o.finish) > 0 {
		w.Strings("gen_ai.response.finish_reasons", o.finish)
	}
	if u := o.usage; u.Present {
		w.Int("gen_ai.usage.input_tokens", u.PromptTokens)
		w.Int("gen_ai.usage.output_tokens", u.CompletionTokens)
		if u.CachedTokens > 0 {
			w.Int("gen_ai.usage.cache_read.input_tokens", u.CachedTokens)
		}
		if u.CacheWriteTokens > 0 {
			w.Int("gen_ai.usage.cache_creation.input_tokens", u.CacheWriteTokens)
		}
	}
	if o.status >= 400 {
		w.String("error.type", statusLabel(o.status))
	}
}

// serverRecord is what the request's span notes: the request's record
// and traceWriter themselves, which nothing changes once the span ended
// (endSpan runs last), and what is read of shared state when it ended.
type serverRecord struct {
	rec           *Record
	op, provider  string
	completion    string
	reservedNanos int64
	reserved      bool
}

// newServerRecord is tw's server record for rec. Booleans that are false
// and the route when it is the requested model are left out of its
// attributes: every attribute costs its encoding and the export.
func newServerRecord(rec *Record, op string) *serverRecord {
	tw := rec.tw
	s := &tw.server
	*s = serverRecord{rec: rec, op: op}
	if rec.dep != nil {
		s.provider = providerName(rec.dep)
	}
	if rec.Reservation != nil {
		s.reserved, s.reservedNanos = true, rec.Reservation.Amount()
	}
	if len(tw.content) > 0 {
		s.completion = truncateUTF8(tw.content, contentLimit)
	}
	return s
}

// WriteAttrs implements telemetry.AttrSource.
func (s *serverRecord) WriteAttrs(w telemetry.AttrWriter) {
	rec, tw := s.rec, s.rec.tw
	o := outcomeOf(rec)
	o.write(w)
	w.String("gen_ai.operation.name", s.op)
	w.String("tollgate.request_id", rec.RequestID)
	w.String("url.path", tw.path)
	w.String("gen_ai.request.model", tw.requestModel)
	w.String("tollgate.key_id", rec.KeyID)
	w.String("tollgate.team_id", rec.TeamID)
	w.Int("tollgate.attempts", int64(rec.Attempts))
	w.String("tollgate.deployment", rec.Deployment)
	w.Float("tollgate.cost_usd", float64(rec.CostNanos)/1e9)
	if rec.FirstByte > 0 {
		w.Float("gen_ai.server.time_to_first_token", rec.FirstByte.Seconds())
	}
	if rec.Model != tw.requestModel {
		w.String("tollgate.model", rec.Model)
	}
	flag(w, "tollgate.stream", rec.Stream)
	flag(w, "tollgate.unpriced", rec.Unpriced)
	if s.provider != "" {
		w.String("gen_ai.provider.name", s.provider)
	}
	if tw.maxTokens > 0 {
		w.Int("gen_ai.request.max_tokens", tw.maxTokens)
	}
	if s.reserved {
		w.String("tollgate.budget.decision", "reserved")
		w.Float("tollgate.budget.reserved_usd", float64(s.reservedNanos)/1e9)
		w.Float("tollgate.budget.charged_usd", float64(rec.BudgetNanos)/1e9)
	}
	s.writeTail(w)
}

func (s *serverRecord) writeTail(w telemetry.AttrWriter) {
	if r := s.rec.RateLimited; r != "" {
		w.String("tollgate.rate_limited", r)
	}
	if p := s.rec.tw.prompt; p != "" {
		w.String("gen_ai.prompt", p)
	}
	if s.completion != "" {
		w.String("gen_ai.completion", s.completion)
	}
}

// attemptRecord is what an attempt's span notes.
type attemptRecord struct {
	at                          attemptInfo
	provider, deployment, route string
	out                         outcome // when it answered
	// When it failed: its error's code (or status label), status, and
	// what it came to (the failure's own fields, copied).
	failed, cools, retry  bool
	failCode, rateLimited string
	failStatus            int
}

// newAttemptRecord is the record of an attempt that ended with f (nil:
// it answered): the request's first in tw, any other a new one.
func newAttemptRecord(rec *Record, rt *raftstore.Route, d *raftstore.Deployment, at *attemptInfo, f *failure) *attemptRecord {
	a := &rec.tw.attempt
	if rec.tw.attemptUsed {
		a = new(attemptRecord)
	}
	rec.tw.attemptUsed = true
	*a = attemptRecord{at: *at, provider: providerName(d), deployment: d.ID, route: rt.Name}
	if f == nil {
		a.out = outcomeOf(rec)
		return a
	}
	a.failed, a.cools, a.retry, a.rateLimited, a.failStatus = true, f.cools, f.retry, f.rateLimited, f.err.Status
	if a.failCode = f.err.Code; a.failCode == "" {
		a.failCode = statusLabel(f.err.Status)
	}
	return a
}

// WriteAttrs implements telemetry.AttrSource.
func (a *attemptRecord) WriteAttrs(w telemetry.AttrWriter) {
	w.String("gen_ai.operation.name", a.at.op)
	w.String("gen_ai.provider.name", a.provider)
	w.String("gen_ai.request.model", a.at.model)
	w.String("tollgate.deployment", a.deployment)
	w.String("tollgate.route", a.route)
	w.Int("tollgate.attempt", int64(a.at.number))
	flag(w, "tollgate.fallback", a.at.fallback)
	flag(w, "tollgate.cooling", a.at.cooling)
	if !a.failed {
		a.out.write(w)
		return
	}
	w.String("error.type", a.failCode)
	w.Int("http.response.status_code", int64(a.failStatus))
	flag(w, "tollgate.cools", a.cools)
	flag(w, "tollgate.retryable", a.retry)
	if a.rateLimited != "" {
		w.String("tollgate.rate_limited", a.rateLimited)
	}
}

// flag writes key as true when on; a false one is left out.
func flag(w telemetry.AttrWriter, key string, on bool) {
	if on {
		w.Bool(key, true)
	}
}

// setAttrs has span note src's attributes: the gateway's tracer keeps src
// for its exporter, any other tracer gets them as a list.
func setAttrs(span trace.Span, src telemetry.AttrSource) {
	if s, ok := span.(interface{ SetAttrSource(telemetry.AttrSource) }); ok {
		s.SetAttrSource(src)
		return
	}
	l := attrLists.Get().(*attrList)
	src.WriteAttrs(l)
	span.SetAttributes(*l...)
	clear(*l) // drop the strings for the collector
	*l = (*l)[:0]
	attrLists.Put(l)
}

// attrList collects attributes for a tracer other than the gateway's.
type attrList []attribute.KeyValue

var attrLists = sync.Pool{New: func() any { l := make(attrList, 0, 32); return &l }}

func (l *attrList) String(k, v string)           { *l = append(*l, attribute.String(k, v)) }
func (l *attrList) Int(k string, v int64)        { *l = append(*l, attribute.Int64(k, v)) }
func (l *attrList) Float(k string, v float64)    { *l = append(*l, attribute.Float64(k, v)) }
func (l *attrList) Bool(k string, v bool)        { *l = append(*l, attribute.Bool(k, v)) }
func (l *attrList) Strings(k string, v []string) { *l = append(*l, attribute.StringSlice(k, v)) }
