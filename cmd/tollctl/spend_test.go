package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func sampleReport() *tollgatev1.SpendReportResponse {
	return &tollgatev1.SpendReportResponse{
		Rows: []*tollgatev1.SpendReportRow{
			{Group: "gpt-4o", Requests: 120, PromptTokens: 50_000, CompletionTokens: 20_000, CachedTokens: 10_000, CacheWriteTokens: 4000, CostNanos: 12_345_678_901},
			{Group: "llama", Requests: 7, PromptTokens: 700, CompletionTokens: 300, UnpricedRequests: 7},
			{Group: "", Requests: 1, PromptTokens: 10, CompletionTokens: 5, CostNanos: 50_000},
		},
		Total: &tollgatev1.SpendReportRow{Group: "total", Requests: 128, PromptTokens: 50_710, CompletionTokens: 20_305,
			CachedTokens: 10_000, CacheWriteTokens: 4000, CostNanos: 12_345_728_901, UnpricedRequests: 7},
	}
}

func TestSpendReportTable(t *testing.T) {
	f := startFake(t)
	f.spend.set(sampleReport(), nil)
	before := time.Now()
	r := f.mustRun(t, "spend", "report")
	req, _ := f.spend.lastRequests()
	if want := before.Add(-30 * 24 * time.Hour).Unix(); req.Since < want-2 || req.Since > want+60 {
		t.Errorf("default since = %d, want about %d", req.Since, want)
	}
	if req.Until != 0 || req.By != "model" || req.KeyId != "" || req.TeamId != "" {
		t.Errorf("default request = %v", req)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 {
		t.Fatalf("want header, 3 rows and TOTAL:\n%s", r.stdout)
	}
	want := [][]string{
		{"GROUP", "REQUESTS", "PROMPT", "COMPLETION", "CACHED", "CACHE-WRITE", "COST", "UNPRICED"},
		{"gpt-4o", "120", "50000", "20000", "10000", "4000", "$12.3457", "0"},
		{"llama", "7", "700", "300", "0", "0", "$0.0000", "7"},
		{"-", "1", "10", "5", "0", "0", "$0.0001", "0"},
		{"TOTAL", "128", "50710", "20305", "10000", "4000", "$12.3457", "7"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !slices.Equal(got, w) {
			t.Errorf("line %d = %v, want %v", i, got, w)
		}
	}
	if !strings.Contains(r.stderr, "7 request(s)") {
		t.Errorf("no unpriced note: %q", r.stderr)
	}

	// No total from the server: the rows are summed.
	rep := sampleReport()
	rep.Total = nil
	f.spend.set(rep, nil)
	r = f.mustRun(t, "spend", "report")
	if !strings.Contains(r.stdout, "TOTAL") || !slices.Equal(strings.Fields(lastLine(r.stdout)), want[4]) {
		t.Errorf("summed total:\n%s", r.stdout)
	}

	// Empty: just the TOTAL row.
	f.spend.set(nil, nil)
	r = f.mustRun(t, "spend", "report", "--by", "day")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "TOTAL") || r.stderr != "" {
		t.Errorf("empty report:\n%s\nstderr %q", r.stdout, r.stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestSpendReportFlags(t *testing.T) {
	f := startFake(t)
	f.mustRun(t, "spend", "report", "--team", "team_1", "--by", "key", "--since", "2026-11-01", "--until", "2026-11-08T12:00:00Z")
	req, _ := f.spend.lastRequests()
	if req.TeamId != "team_1" || req.KeyId != "" || req.By != "key" ||
		req.Since != time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix() || req.Until != time.Date(2026, 11, 8, 12, 0, 0, 0, time.UTC).Unix() {
		t.Errorf("request = %v", req)
	}
	before := time.Now()
	f.mustRun(t, "spend", "report", "--key", "key_1", "--by", "hour", "--since", "24h", "--until", "1h")
	req, _ = f.spend.lastRequests()
	if want := before.Add(-24 * time.Hour).Unix(); req.KeyId != "key_1" || req.By != "hour" || req.Since < want-2 || req.Since > want+60 {
		t.Errorf("request = %v, want since about %d", req, want)
	}
	if want := before.Add(-time.Hour).Unix(); req.Until < want-2 || req.Until > want+60 {
		t.Errorf("until = %d, want about %d", req.Until, want)
	}
	f.mustRun(t, "spend", "report", "--since", "2026-11-01T09:30:00+01:00")
	if req, _ = f.spend.lastRequests(); req.Since != time.Date(2026, 11, 1, 8, 30, 0, 0, time.UTC).Unix() {
		t.Errorf("RFC 3339 since = %d", req.Since)
	}

	for _, args := range [][]string{
		{"spend", "report", "--since", "yesterday"},
		{"spend", "report", "--since", "2026-11-31"},
		{"spend", "report", "--since", "-7d"},
		{"spend", "report", "--until", "tomorrow"},
		{"spend", "report", "--since", "1d", "--until", "2d"}, // until before since
		{"spend", "report", "--by", "week"},
		{"spend", "report", "--key", "k", "--team", "t"},
		{"spend", "report", "extra"},
	} {
		r := f.run(t, args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "tollctl: ") {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
}

func TestSpendReportJSON(t *testing.T) {
	f := startFake(t)
	f.spend.set(sampleReport(), nil)
	m := decodeObject(t, f.mustRun(t, "spend", "report", "-o", "json").stdout)
	rows := m["rows"].([]any)
	total := m["total"].(map[string]any)
	if len(rows) != 3 || rows[0].(map[string]any)["cost_nanos"] != "12345678901" || total["requests"] != "128" || total["unpriced_requests"] != "7" {
		t.Errorf("json = %v", m)
	}
}

func TestSpendLogs(t *testing.T) {
	f := startFake(t)
	if r := f.mustRun(t, "spend", "logs"); !strings.Contains(r.stdout, "No records") || r.stderr != "" {
		t.Errorf("empty: %q / %q", r.stdout, r.stderr)
	}
	at := time.Date(2026, 11, 20, 9, 15, 30, 123_000_000, time.UTC)
	f.spend.set(nil, &tollgatev1.SpendLogsResponse{
		Records: []*tollgatev1.SpendRecord{
			{UnixNanos: at.UnixNano(), Node: "n1", KeyId: "key_1", TeamId: "team_1", Model: "gpt-4o", Deployment: "openai",
				Status: 200, PromptTokens: 1200, CompletionTokens: 345, CostNanos: 6_450_000, LatencyMicros: 1_234_567, TtftMicros: 456_789},
			{UnixNanos: at.Add(-time.Minute).UnixNano(), Node: "n2", KeyId: "key_2", Model: "llama", Deployment: "vllm",
				Status: 499, PromptTokens: 10, Unpriced: true, LatencyMicros: 850},
		},
		UnreachableNodes: []string{"n3", "n4"},
	})
	r := f.mustRun(t, "spend", "logs", "--key", "key_1", "--team", "team_1", "--limit", "20", "--since", "2026-11-20")
	_, req := f.spend.lastRequests()
	if req.KeyId != "key_1" || req.TeamId != "team_1" || req.Limit != 20 || req.Since != time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).Unix() {
		t.Errorf("request = %v", req)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header and 2 rows:\n%s", r.stdout)
	}
	want := [][]string{
		{"TIME", "NODE", "KEY", "MODEL", "DEPLOYMENT", "STATUS", "PROMPT", "COMPLETION", "COST", "LATENCY", "TTFT"},
		{"2026-11-20T09:15:30Z", "n1", "key_1", "gpt-4o", "openai", "200", "1200", "345", "$0.0065", "1.235s", "457ms"},
		{"2026-11-20T09:14:30Z", "n2", "key_2", "llama", "vllm", "499", "10", "0", "unpriced", "850µs", "-"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !slices.Equal(got, w) {
			t.Errorf("line %d = %v, want %v", i, got, w)
		}
	}
	if !strings.Contains(r.stderr, "warning: ") || !strings.Contains(r.stderr, "n3, n4") {
		t.Errorf("no unreachable warning: %q", r.stderr)
	}

	// Defaults: no limit and no since sent.
	r = f.mustRun(t, "spend", "logs", "-o", "json")
	if _, req = f.spend.lastRequests(); req.Limit != 0 || req.Since != 0 || req.KeyId != "" {
		t.Errorf("default request = %v", req)
	}
	m := decodeObject(t, r.stdout)
	recs := m["records"].([]any)
	if len(recs) != 2 || recs[0].(map[string]any)["cost_nanos"] != "6450000" || recs[1].(map[string]any)["unpriced"] != true {
		t.Errorf("json = %v", m)
	}
	if nodes := m["unreachable_nodes"].([]any); len(nodes) != 2 {
		t.Errorf("unreachable_nodes = %v", nodes)
	}
	if !strings.Contains(r.stderr, "n3, n4") {
		t.Errorf("json mode: no warning on stderr: %q", r.stderr)
	}

	for _, args := range [][]string{
		{"spend", "logs", "--limit", "10001"},
		{"spend", "logs", "--limit", "-1"},
		{"spend", "logs", "--since", "soon"},
		{"spend", "logs", "extra"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
}
