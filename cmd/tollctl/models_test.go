package main

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

func deploymentIDs(f *fake, model string) []string {
	var ids []string
	for _, d := range f.models.get(model).GetDeployments() {
		ids = append(ids, d.GetId())
	}
	return ids
}

func TestModelAddDerivesDeploymentIDs(t *testing.T) {
	f := startFake(t)
	f.mustRun(t, "model", "add", "gpt-4o", "--provider", "openai", "--credential", "openai")
	f.mustRun(t, "model", "add", "gpt-4o", "--provider", "openai", "--base-url", "https://eu.example.com/v1/")
	f.mustRun(t, "model", "add", "gpt-4o", "--provider", "openai-compatible", "--base-url", "http://127.0.0.1:8000/v1")
	f.mustRun(t, "model", "add", "gpt-4o", "--provider", "openai", "--base-url", "http://10.0.0.1/v1", "--deployment", "openai-3")
	r := f.mustRun(t, "model", "add", "gpt-4o", "--provider", "openai", "--base-url", "http://10.0.0.2/v1", "-o", "json")

	want := []string{"openai", "openai-2", "openai-compatible", "openai-3", "openai-4"}
	if got := deploymentIDs(f, "gpt-4o"); !slices.Equal(got, want) {
		t.Errorf("deployment ids = %v, want %v", got, want)
	}
	m := decodeObject(t, r.stdout)
	if m["name"] != "gpt-4o" || len(m["deployments"].([]any)) != 5 {
		t.Errorf("json route = %v", m)
	}

	deps := f.models.get("gpt-4o").GetDeployments()
	if d := deps[0]; d.BaseUrl != routing.OpenAIBaseURL || d.UpstreamModel != "gpt-4o" || d.Credential != "openai" {
		t.Errorf("defaults: %v", d)
	}
	if d := deps[1]; d.BaseUrl != "https://eu.example.com/v1" {
		t.Errorf("trailing slash kept: %v", d.BaseUrl)
	}
	// A fresh route starts again at the bare provider name.
	f.mustRun(t, "model", "add", "echo", "--provider", "demo")
	if got := deploymentIDs(f, "echo"); !slices.Equal(got, []string{"demo"}) {
		t.Errorf("demo ids = %v", got)
	}
}

func TestModelAddAllFlags(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "model", "add", "llama", "--provider", "openai-compatible", "--base-url", "http://127.0.0.1:8000/v1",
		"--upstream-model", "meta/llama-3", "--credential", "vllm", "--deployment", "local", "--weight", "3",
		"--priority", "1", "--upstream-timeout", "30s")
	if calls := f.models.takeCalls(); !slices.Equal(calls, []string{"AddDeployment"}) {
		t.Errorf("with --deployment, calls = %v; want only AddDeployment", calls)
	}
	d := f.models.get("llama").GetDeployments()[0]
	if d.Id != "local" || d.Provider != "openai-compatible" || d.BaseUrl != "http://127.0.0.1:8000/v1" ||
		d.UpstreamModel != "meta/llama-3" || d.Credential != "vllm" || d.Weight != 3 || d.Priority != 1 || d.TimeoutMs != 30000 {
		t.Errorf("deployment = %v", d)
	}
	for _, want := range []string{"Added deployment local to model llama", "meta/llama-3", "30s"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestModelAddValidation(t *testing.T) {
	f := startFake(t)
	for _, args := range [][]string{
		{"model", "add", "m", "--provider", "openai-compatible"},                                    // no base URL
		{"model", "add", "m", "--provider", "openai-compatible", "--base-url", "ftp://x/v1"},        // not http(s)
		{"model", "add", "m", "--provider", "openai-compatible", "--base-url", "127.0.0.1:8000/v1"}, // no scheme
		{"model", "add", "m", "--provider", "anthropix", "--base-url", "http://x/v1"},               // unknown provider
		{"model", "add", "m", "--base-url", "http://x/v1"},                                          // no provider
		{"model", "add", "--provider", "demo"},                                                      // no name
		{"model", "add", "m", "--provider", "demo", "--upstream-timeout", "soon"},
		{"model", "add", "m", "--provider", "demo", "--weight", "-1"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if calls := f.models.takeCalls(); len(calls) != 0 {
		t.Errorf("invalid input reached the server: %v", calls)
	}
	r := f.run(t, "model", "add", "m", "--provider", "demo", "--deployment", "x")
	r2 := f.run(t, "model", "add", "m", "--provider", "demo", "--deployment", "x")
	if r.code != 0 || r2.code != 1 || !strings.Contains(r2.stderr, "already exists") {
		t.Errorf("duplicate id: exit %d/%d stderr %q", r.code, r2.code, r2.stderr)
	}
}

func TestModelUpdateSendsOnlyChangedFields(t *testing.T) {
	f := startFake(t)
	f.mustRun(t, "model", "add", "gpt", "--provider", "openai", "--credential", "openai", "--weight", "2")

	// Single deployment: --deployment may be left out.
	f.mustRun(t, "model", "update", "gpt", "--priority", "0")
	req := f.models.lastUpdateReq()
	if req.Model != "gpt" || req.DeploymentId != "openai" || req.Priority == nil || *req.Priority != 0 ||
		req.Weight != nil || req.Provider != nil || req.BaseUrl != nil || req.UpstreamModel != nil || req.Credential != nil || req.TimeoutMs != nil {
		t.Errorf("--priority 0 sent %v", req)
	}

	f.mustRun(t, "model", "add", "gpt", "--provider", "openai")
	r := f.mustRun(t, "model", "update", "gpt", "--deployment", "openai-2", "--credential", "", "--base-url", "http://h/v1", "--upstream-timeout", "0")
	req = f.models.lastUpdateReq()
	if req.DeploymentId != "openai-2" || req.Credential == nil || *req.Credential != "" || req.BaseUrl == nil || *req.BaseUrl != "http://h/v1" ||
		req.TimeoutMs == nil || *req.TimeoutMs != 0 || req.Weight != nil || req.Priority != nil || req.Provider != nil {
		t.Errorf("update sent %v", req)
	}
	if !strings.Contains(r.stdout, "Updated deployment openai-2 of model gpt") {
		t.Errorf("output:\n%s", r.stdout)
	}
	if d := f.models.get("gpt").GetDeployments()[0]; d.Weight != 2 || d.Credential != "openai" {
		t.Errorf("other deployment changed: %v", d)
	}

	// Two deployments: --deployment is needed.
	r = f.run(t, "model", "update", "gpt", "--weight", "5")
	if r.code != 2 || !strings.Contains(r.stderr, "openai, openai-2") {
		t.Errorf("ambiguous: exit %d stderr %q", r.code, r.stderr)
	}
	if r := f.run(t, "model", "update", "gpt", "--deployment", "openai"); r.code != 2 {
		t.Errorf("nothing to update: exit %d", r.code)
	}
	if r := f.run(t, "model", "update", "gpt", "--deployment", "nope", "--weight", "1"); r.code != 1 || !strings.Contains(r.stderr, "no deployment nope") {
		t.Errorf("unknown deployment: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestModelRemove(t *testing.T) {
	f := startFake(t)
	f.mustRun(t, "model", "add", "gpt", "--provider", "openai")
	f.mustRun(t, "model", "add", "gpt", "--provider", "openai")
	f.mustRun(t, "model", "add", "echo", "--provider", "demo")
	f.models.takeCalls()

	r := f.mustRun(t, "model", "remove", "gpt", "--deployment", "openai")
	if got := deploymentIDs(f, "gpt"); !slices.Equal(got, []string{"openai-2"}) {
		t.Errorf("after remove: %v", got)
	}
	if !strings.Contains(r.stdout, "Removed deployment openai from model gpt") {
		t.Errorf("output:\n%s", r.stdout)
	}
	r = f.mustRun(t, "model", "remove", "gpt", "--deployment", "openai-2", "-o", "json")
	if strings.TrimSpace(r.stdout) != "null" || f.models.get("gpt") != nil {
		t.Errorf("last deployment: json %q, route %v", r.stdout, f.models.get("gpt"))
	}
	f.mustRun(t, "model", "remove", "echo")
	if f.models.get("echo") != nil {
		t.Error("route not deleted")
	}
	want := []string{"RemoveDeployment", "RemoveDeployment", "DeleteModel"}
	if calls := f.models.takeCalls(); !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}
	if r := f.run(t, "model", "remove", "echo"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("removing again: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestModelListAndGet(t *testing.T) {
	f := startFake(t)
	if r := f.mustRun(t, "model", "list"); !strings.Contains(r.stdout, "No models") {
		t.Errorf("empty list:\n%s", r.stdout)
	}
	f.mustRun(t, "model", "add", "gpt", "--provider", "openai", "--credential", "oa", "--weight", "4", "--priority", "1")
	f.mustRun(t, "model", "add", "gpt", "--provider", "openai-compatible", "--base-url", "http://127.0.0.1:8000/v1", "--upstream-model", "qwen")
	f.mustRun(t, "model", "add", "echo", "--provider", "demo")

	r := f.mustRun(t, "model", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("want header and 3 rows:\n%s", r.stdout)
	}
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"MODEL", "DEPLOYMENT", "PROVIDER", "UPSTREAM-MODEL", "BASE-URL", "WEIGHT", "PRIORITY", "CREDENTIAL", "FIRST-TOKEN", "OPTIONS", "LIMITS"}) {
		t.Errorf("header = %v", got)
	}
	wantRows := [][]string{
		{"echo", "demo", "demo", "echo", "-", "1", "0", "-", "-", "-", "-"},
		{"gpt", "openai", "openai", "gpt", routing.OpenAIBaseURL, "4", "1", "oa", "-", "-", "-"},
		{"gpt", "openai-compatible", "openai-compatible", "qwen", "http://127.0.0.1:8000/v1", "1", "0", "-", "-", "-", "-"},
	}
	for i, want := range wantRows {
		if got := strings.Fields(lines[i+1]); !slices.Equal(got, want) {
			t.Errorf("row %d = %v, want %v", i, got, want)
		}
	}

	routes := decodeArray(t, f.mustRun(t, "model", "list", "-o", "json").stdout)
	if len(routes) != 2 || routes[1]["name"] != "gpt" {
		t.Fatalf("json = %v", routes)
	}
	d := routes[1]["deployments"].([]any)[0].(map[string]any)
	if d["upstream_model"] != "gpt" || d["base_url"] != routing.OpenAIBaseURL || d["weight"] != 4.0 || d["timeout_ms"] != 0.0 {
		t.Errorf("json deployment = %v", d)
	}

	r = f.mustRun(t, "model", "get", "gpt")
	for _, want := range []string{"Model gpt", "openai-compatible", "qwen", "TIMEOUT", "default"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := f.run(t, "model", "get", "nope"); r.code != 1 || r.stderr != "tollctl: model nope not found\n" {
		t.Errorf("get missing: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestModelAddPrice(t *testing.T) {
	f := startFake(t)
	f.mustRun(t, "model", "add", "llama", "--provider", "openai-compatible", "--base-url", "http://127.0.0.1:8000/v1",
		"--input-price", "2.50", "--output-price", "10", "--cached-price", "$1.25")
	want := &tollgatev1.Price{InputMicrosPerMtok: 2_500_000, OutputMicrosPerMtok: 10_000_000, CachedInputMicrosPerMtok: 1_250_000}
	if got := f.models.get("llama").GetDeployments()[0].GetPrice(); !proto.Equal(got, want) {
		t.Errorf("price = %v, want %v", got, want)
	}
	f.mustRun(t, "model", "add", "llama", "--provider", "demo", "--input-price", "0.000001", "--output-price", "0")
	want = &tollgatev1.Price{InputMicrosPerMtok: 1}
	if got := f.models.get("llama").GetDeployments()[1].GetPrice(); !proto.Equal(got, want) {
		t.Errorf("price = %v, want %v", got, want)
	}
	f.mustRun(t, "model", "add", "claude", "--provider", "anthropic", "--input-price", "3", "--output-price", "15",
		"--cache-write-price", "3.75", "--price-tier", "above=200000,input=6,output=22.50,cached=0.6,cache-write=7.5",
		"--price-tier", "output=30, above = 1000000 ,input=$9,cache-write=9")
	want = &tollgatev1.Price{InputMicrosPerMtok: 3_000_000, OutputMicrosPerMtok: 15_000_000, CacheWriteMicrosPerMtok: 3_750_000,
		Tiers: []*tollgatev1.PriceTier{
			{AbovePromptTokens: 200_000, InputMicrosPerMtok: 6_000_000, OutputMicrosPerMtok: 22_500_000, CachedInputMicrosPerMtok: 600_000, CacheWriteMicrosPerMtok: 7_500_000},
			{AbovePromptTokens: 1_000_000, InputMicrosPerMtok: 9_000_000, OutputMicrosPerMtok: 30_000_000, CacheWriteMicrosPerMtok: 9_000_000},
		}}
	if got := f.models.get("claude").GetDeployments()[0].GetPrice(); !proto.Equal(got, want) {
		t.Errorf("price = %v, want %v", got, want)
	}
	f.mustRun(t, "model", "add", "echo", "--provider", "demo")
	if got := f.models.get("echo").GetDeployments()[0].GetPrice(); got != nil {
		t.Errorf("no price flags sent price %v", got)
	}

	f.models.takeCalls()
	for _, args := range [][]string{
		{"model", "add", "m", "--provider", "demo", "--input-price", "1"},                                // no output price
		{"model", "add", "m", "--provider", "demo", "--output-price", "1"},                               // no input price
		{"model", "add", "m", "--provider", "demo", "--cached-price", "1"},                               // alone
		{"model", "add", "m", "--provider", "demo", "--input-price", "-1", "--output-price", "1"},        // negative
		{"model", "add", "m", "--provider", "demo", "--input-price", "1e1", "--output-price", "1"},       // exponent
		{"model", "add", "m", "--provider", "demo", "--input-price", "0.0000001", "--output-price", "1"}, // below a micro-dollar
		{"model", "update", "m", "--input-price", "1"},                                                   // add only
		{"model", "add", "m", "--provider", "demo", "--cache-write-price", "1"},                          // alone
		{"model", "add", "m", "--provider", "demo", "--price-tier", "above=10,input=1,output=1"},         // alone
		{"model", "add", "m", "--provider", "demo", "--input-price", "1", "--output-price", "1", "--price-tier", "above=10,input=1"},
		{"model", "add", "m", "--provider", "demo", "--input-price", "1", "--output-price", "1", "--price-tier", "input=1,output=1"},
		{"model", "add", "m", "--provider", "demo", "--input-price", "1", "--output-price", "1", "--price-tier", "above=0,input=1,output=1"},
		{"model", "add", "m", "--provider", "demo", "--input-price", "1", "--output-price", "1", "--price-tier", "above=10,input=1,output=1,output=2"},
		{"model", "add", "m", "--provider", "demo", "--input-price", "1", "--output-price", "1", "--price-tier", "above=10,input=1,output=1,audio=2"},
		{"model", "add", "m", "--provider", "demo", "--input-price", "1", "--output-price", "1", "--price-tier", "above=10,input=-1,output=1"},
		{"model", "add", "m", "--provider", "demo", "--input-price", "1", "--output-price", "1",
			"--price-tier", "above=20,input=1,output=1", "--price-tier", "above=10,input=2,output=2"}, // descending
		{"model", "add", "m", "--provider", "demo", "--input-price", "1", "--output-price", "1", "--cached-price", "0.1",
			"--price-tier", "above=20,input=2,output=2"}, // the tier lacks cached=
		{"model", "add", "m", "--provider", "demo", "--input-price", "1", "--output-price", "1", "--cache-write-price", "1.25",
			"--price-tier", "above=20,input=2,output=2"}, // the tier lacks cache-write=
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if calls := f.models.takeCalls(); len(calls) != 0 {
		t.Errorf("invalid input reached the server: %v", calls)
	}
}

func TestModelPrices(t *testing.T) {
	f := startFake(t)
	if r := f.mustRun(t, "model", "prices"); !strings.Contains(r.stdout, "No models") {
		t.Errorf("empty:\n%s", r.stdout)
	}
	f.mustRun(t, "model", "add", "gpt-4o", "--provider", "openai")
	f.mustRun(t, "model", "add", "mini", "--provider", "openai", "--upstream-model", "gpt-4o-mini")
	f.mustRun(t, "model", "add", "claude", "--provider", "anthropic", "--upstream-model", "claude-sonnet-4-5")
	f.mustRun(t, "model", "add", "llama", "--provider", "openai-compatible", "--base-url", "http://h/v1", "--deployment", "vllm")
	f.mustRun(t, "model", "add", "llama", "--provider", "openai-compatible", "--base-url", "http://h2/v1", "--deployment", "cheap",
		"--input-price", "0.075", "--output-price", "0.3")

	r := f.mustRun(t, "model", "prices")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 6 {
		t.Fatalf("want header and 5 rows:\n%s", r.stdout)
	}
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"MODEL", "DEPLOYMENT", "PROVIDER", "UPSTREAM-MODEL", "INPUT/MTOK", "OUTPUT/MTOK", "CACHED/MTOK", "CACHE-WRITE/MTOK", "LONG-PROMPT", "SOURCE"}) {
		t.Errorf("header = %v", got)
	}
	wantRows := [][]string{
		{"claude", "anthropic", "anthropic", "claude-sonnet-4-5", "$3.00", "$15.00", "$0.30", "$3.75", ">200000:", "$6.00/$22.50", "built-in", "anthropic/claude-sonnet-4-5"},
		{"gpt-4o", "openai", "openai", "gpt-4o", "$2.50", "$10.00", "$1.25", "$2.50", "-", "built-in", "openai/gpt-4o"}, // cache write: the input price
		{"llama", "vllm", "openai-compatible", "llama", "unknown", "unknown", "unknown", "unknown", "-", "unknown"},
		{"llama", "cheap", "openai-compatible", "llama", "$0.075", "$0.30", "$0.075", "$0.075", "-", "override"}, // cache rates: the input price
		{"mini", "openai", "openai", "gpt-4o-mini", "$0.15", "$0.60", "$0.15", "$0.15", "-", "built-in", "openai/gpt-4o-mini"},
	}
	for i, want := range wantRows {
		if got := strings.Fields(lines[i+1]); !slices.Equal(got, want) {
			t.Errorf("row %d = %v, want %v", i, got, want)
		}
	}

	r = f.mustRun(t, "model", "prices", "llama", "-o", "json")
	rows := decodeArray(t, r.stdout)
	if len(rows) != 2 || rows[0]["price"] != nil || rows[0]["source"] != "unknown" {
		t.Fatalf("json = %v", rows)
	}
	if p := rows[1]["price"].(map[string]any); p["input_micros_per_mtok"] != "75000" || p["output_micros_per_mtok"] != "300000" {
		t.Errorf("json price = %v", p)
	}
	if r := f.run(t, "model", "prices", "nope"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("unknown model: exit %d stderr %q", r.code, r.stderr)
	}
	if r := f.run(t, "model", "prices", "a", "b"); r.code != 2 {
		t.Errorf("two args: exit %d", r.code)
	}
}
