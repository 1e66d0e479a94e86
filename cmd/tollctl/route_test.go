package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

func TestModelAddProviders(t *testing.T) {
	f := startFake(t)
	for _, c := range []struct {
		args                  []string
		id, provider, baseURL string
		options               map[string]string
		sentBaseURL, upstream string
	}{
		{args: []string{"claude", "--provider", "anthropic", "--upstream-model", "claude-sonnet-4-20250514", "--credential", "anthropic"},
			id: "anthropic", provider: "anthropic", baseURL: routing.AnthropicBaseURL, upstream: "claude-sonnet-4-20250514"},
		{args: []string{"gpt-4o", "--provider", "openai"},
			id: "openai", provider: "openai", baseURL: routing.OpenAIBaseURL, upstream: "gpt-4o"},
		{args: []string{"flash", "--provider", "gemini", "--upstream-model", "gemini-2.5-flash"},
			id: "gemini", provider: "gemini", baseURL: routing.GeminiBaseURL, upstream: "gemini-2.5-flash"},
		{args: []string{"pro", "--provider", "gemini", "--option", "vertex_project=my-project", "--option", "vertex_location = europe-west4"},
			id: "gemini", provider: "gemini", baseURL: "https://europe-west4-aiplatform.googleapis.com/v1", upstream: "pro",
			options: map[string]string{"vertex_project": "my-project", "vertex_location": "europe-west4"}},
		{args: []string{"gpt-4o", "--provider", "azure-openai", "--base-url", "https://res.openai.azure.com/", "--upstream-model", "my-dep",
			"--option", "api_version=2024-10-21"},
			id: "azure-openai", provider: "azure-openai", baseURL: "https://res.openai.azure.com", upstream: "my-dep",
			options: map[string]string{"api_version": "2024-10-21"}, sentBaseURL: "https://res.openai.azure.com"},
		{args: []string{"claude", "--provider", "bedrock", "--option", "region=us-east-1", "--upstream-model", "us.anthropic.claude-sonnet-4-20250514-v1:0"},
			id: "bedrock", provider: "bedrock", baseURL: "https://bedrock-runtime.us-east-1.amazonaws.com",
			upstream: "us.anthropic.claude-sonnet-4-20250514-v1:0", options: map[string]string{"region": "us-east-1"}},
		{args: []string{"llama", "--provider", "groq", "--upstream-model", "llama-3.3-70b-versatile"},
			id: "groq", provider: "openai-compatible", baseURL: "https://api.groq.com/openai/v1", upstream: "llama-3.3-70b-versatile",
			options: map[string]string{"preset": "groq"}},
		{args: []string{"claude-*", "--provider", "anthropic", "--upstream-model", "*", "--credential", "anthropic"},
			id: "anthropic", provider: "anthropic", baseURL: routing.AnthropicBaseURL, upstream: "*"},
	} {
		r := f.mustRun(t, append([]string{"model", "add"}, c.args...)...)
		if r.stderr != "" {
			t.Errorf("%v: stderr %q", c.args, r.stderr)
		}
		name := c.args[0]
		add, _, _ := f.models.lastRequests()
		sent := add.GetDeployment()
		sentOptions := maps.Clone(c.options) // all but the preset, which the server records
		delete(sentOptions, "preset")
		if sent.GetProvider() != c.args[2] || sent.GetBaseUrl() != c.sentBaseURL || !maps.Equal(sent.GetOptions(), sentOptions) {
			t.Errorf("%v: sent %v", c.args, sent)
		}
		deps := f.models.get(name).GetDeployments()
		d := deps[len(deps)-1]
		if d.Id != c.id || d.Provider != c.provider || d.BaseUrl != c.baseURL || d.UpstreamModel != c.upstream ||
			!maps.Equal(d.Options, c.options) {
			t.Errorf("%v: stored %v", c.args, d)
		}
	}

	// The server names what it misses.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"model", "add", "m", "--provider", "bedrock"}, "--option region=us-east-1"},
		{[]string{"model", "add", "m", "--provider", "openai", "--option", "region=us-east-1"}, `option "region" does not apply to provider openai`},
	} {
		if r := f.run(t, c.args...); r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

func TestModelAddUsageErrors(t *testing.T) {
	f := startFake(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "openai-compatible"}, "--base-url is required for provider openai-compatible"},
		{[]string{"--provider", "openai-compatible"}, "groq"}, // presets are suggested
		{[]string{"--provider", "azure-openai", "--upstream-model", "dep"}, "https://NAME.openai.azure.com"},
		{[]string{"--provider", "bedrock", "--option", "region"}, `invalid --option "region": use key=value`},
		{[]string{"--provider", "gemini", "--option", "=x"}, `invalid --option "=x"`},
		{[]string{"--provider", "openai", "--first-token-timeout", "soon"}, "--first-token-timeout"},
		{[]string{"--provider", "openai", "--first-token-timeout", "100us"}, "out of range"},
		{[]string{"--provider", "mistral-ai"}, "invalid --provider"},
		{[]string{"--provider", "openai", "--clear-options"}, "unknown flag"}, // update only
	} {
		args := append([]string{"model", "add", "m"}, c.args...)
		r := f.run(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d stderr %q, want exit 2 and %q", args, r.code, r.stderr, c.want)
		}
	}
	if calls := f.models.takeCalls(); len(calls) != 0 {
		t.Errorf("invalid input reached the server: %v", calls)
	}
	r := f.run(t, "model", "add", "--help")
	for _, want := range []string{"--option", "--first-token-timeout", "azure-openai", "bedrock", "perplexity", "vertex_project",
		"api_version", "--provider groq", "'claude-*'", "--upstream-model '*'"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("model add --help lacks %q", want)
		}
	}
}

func TestModelAddBaseURLNote(t *testing.T) {
	f := startFake(t)
	for _, c := range []struct {
		args []string
		note string // "" for none
	}{
		{[]string{"--provider", "openai-compatible", "--base-url", "http://127.0.0.1:8000"}, "usually ends in /v1"},
		{[]string{"--provider", "anthropic", "--base-url", "https://proxy.example.com"}, "the API root of anthropic usually ends in /v1"},
		{[]string{"--provider", "gemini", "--base-url", "https://proxy.example.com"}, "/v1beta"},
		{[]string{"--provider", "groq", "--base-url", "https://proxy.example.com"}, "/openai/v1"},
		{[]string{"--provider", "azure-openai", "--base-url", "https://res.openai.azure.com"}, ""},
		{[]string{"--provider", "bedrock", "--base-url", "https://vpce.example.com", "--option", "region=eu-west-1"}, ""},
		{[]string{"--provider", "perplexity", "--base-url", "https://proxy.example.com"}, ""},
		{[]string{"--provider", "openai-compatible", "--base-url", "http://127.0.0.1:8000/v1"}, ""},
	} {
		r := f.mustRun(t, append([]string{"model", "add", "m"}, c.args...)...)
		if c.note == "" && r.stderr != "" || c.note != "" && (!strings.HasPrefix(r.stderr, "note: ") || !strings.Contains(r.stderr, c.note)) {
			t.Errorf("%v: stderr %q, want note %q", c.args, r.stderr, c.note)
		}
	}
}

func TestModelAddFirstTokenTimeout(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "model", "add", "gpt", "--provider", "openai", "--first-token-timeout", "5s")
	if d := f.models.get("gpt").GetDeployments()[0]; d.FirstTokenTimeoutMs != 5000 {
		t.Errorf("first token timeout = %d", d.FirstTokenTimeoutMs)
	}
	if !strings.Contains(r.stdout, "FIRST-TOKEN") || !strings.Contains(r.stdout, " 5s ") {
		t.Errorf("output:\n%s", r.stdout)
	}
	f.mustRun(t, "model", "add", "gpt", "--provider", "openai")
	if d := f.models.get("gpt").GetDeployments()[1]; d.FirstTokenTimeoutMs != 0 {
		t.Errorf("default first token timeout = %d", d.FirstTokenTimeoutMs)
	}
}

func TestModelUpdateOptionsAndFirstToken(t *testing.T) {
	f := startFake(t)
	f.mustRun(t, "model", "add", "gpt", "--provider", "azure-openai", "--base-url", "https://res.openai.azure.com",
		"--option", "api_version=2024-10-21", "--first-token-timeout", "5s")

	// Flags other than --option leave the options alone.
	f.mustRun(t, "model", "update", "gpt", "--weight", "2")
	req := f.models.lastUpdateReq()
	if req.SetOptions || req.Options != nil || req.FirstTokenTimeoutMs != nil {
		t.Errorf("--weight sent %v", req)
	}

	f.mustRun(t, "model", "update", "gpt", "--option", "api_version=2025-01-01-preview", "--first-token-timeout", "10s")
	req = f.models.lastUpdateReq()
	if !req.SetOptions || !maps.Equal(req.Options, map[string]string{"api_version": "2025-01-01-preview"}) ||
		req.FirstTokenTimeoutMs == nil || *req.FirstTokenTimeoutMs != 10000 {
		t.Errorf("--option sent %v", req)
	}
	if d := f.models.get("gpt").GetDeployments()[0]; d.Options["api_version"] != "2025-01-01-preview" || d.FirstTokenTimeoutMs != 10000 {
		t.Errorf("stored %v", d)
	}

	f.mustRun(t, "model", "update", "gpt", "--clear-options", "--first-token-timeout", "0")
	req = f.models.lastUpdateReq()
	if !req.SetOptions || len(req.Options) != 0 || req.FirstTokenTimeoutMs == nil || *req.FirstTokenTimeoutMs != 0 {
		t.Errorf("--clear-options sent %v", req)
	}
	if d := f.models.get("gpt").GetDeployments()[0]; len(d.Options) != 0 || d.FirstTokenTimeoutMs != 0 {
		t.Errorf("stored %v", d)
	}

	// A new provider with --base-url "": the server fills in its default.
	f.mustRun(t, "model", "update", "gpt", "--provider", "bedrock", "--option", "region=eu-central-1", "--base-url", "")
	req = f.models.lastUpdateReq()
	if req.BaseUrl == nil || *req.BaseUrl != "" || req.GetProvider() != "bedrock" {
		t.Errorf("--base-url \"\" sent %v", req)
	}
	if d := f.models.get("gpt").GetDeployments()[0]; d.BaseUrl != "https://bedrock-runtime.eu-central-1.amazonaws.com" {
		t.Errorf("stored %v", d)
	}
	// A preset as the new provider.
	f.mustRun(t, "model", "update", "gpt", "--provider", "groq", "--clear-options", "--base-url", "")
	if d := f.models.get("gpt").GetDeployments()[0]; d.Provider != "openai-compatible" || d.Options["preset"] != "groq" ||
		d.BaseUrl != routing.Presets["groq"].BaseURL {
		t.Errorf("stored %v", d)
	}

	f.models.takeCalls()
	for _, args := range [][]string{
		{"model", "update", "gpt", "--option", "api_version"},
		{"model", "update", "gpt", "--option", "a=b", "--clear-options"},
		{"model", "update", "gpt", "--first-token-timeout", "-1s"},
		{"model", "update", "gpt", "--provider", "bogus"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if calls := f.models.takeCalls(); len(calls) != 0 {
		t.Errorf("invalid input reached the server: %v", calls)
	}
	// Options the provider does not take: the server says so.
	if r := f.run(t, "model", "update", "gpt", "--option", "region=x"); r.code != 1 || !strings.Contains(r.stderr, `option "region" does not apply`) {
		t.Errorf("wrong option: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestModelShowsOptions(t *testing.T) {
	f := startFake(t)
	f.mustRun(t, "model", "add", "gpt-4o-mini", "--provider", "openai")
	f.mustRun(t, "model", "add", "gpt-4.1", "--provider", "openai")
	f.mustRun(t, "model", "add", "gpt-4o", "--provider", "azure-openai", "--base-url", "https://res.openai.azure.com",
		"--option", "api_version=2024-10-21", "--first-token-timeout", "2500ms", "--deployment", "azure", "--rpm", "60")
	f.mustRun(t, "model", "route", "gpt-4o", "--strategy", "latency", "--fallback", "gpt-4o-mini,gpt-4.1",
		"--context-fallback", "gpt-4.1", "--alias", "gpt4", "--max-attempts", "3")

	r := f.mustRun(t, "model", "get", "gpt-4o")
	for _, want := range []string{"Strategy:           latency\n", "Fallbacks:          gpt-4o-mini, gpt-4.1\n",
		"Context fallbacks:  gpt-4.1\n", "Aliases:            gpt4\n", "Max attempts:       3\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, r.stdout)
		}
	}
	table := strings.SplitN(r.stdout, "\n\n", 2)[1]
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"DEPLOYMENT", "PROVIDER", "UPSTREAM-MODEL", "BASE-URL", "WEIGHT",
		"PRIORITY", "TIMEOUT", "FIRST-TOKEN", "CREDENTIAL", "OPTIONS", "LIMITS"}) {
		t.Errorf("header = %v", got)
	}
	if got := strings.Fields(lines[1]); !slices.Equal(got, []string{"azure", "azure-openai", "gpt-4o", "https://res.openai.azure.com", "1",
		"0", "default", "2.5s", "-", "api_version=2024-10-21", "60rpm"}) {
		t.Errorf("row = %v", got)
	}
	// A route without options shows the defaults.
	r = f.mustRun(t, "model", "get", "gpt-4.1")
	for _, want := range []string{"Strategy:           weighted (default)\n", "Fallbacks:          -\n", "Max attempts:       default\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, r.stdout)
		}
	}

	m := decodeObject(t, f.mustRun(t, "model", "get", "gpt-4o", "-o", "json").stdout)
	o := m["options"].(map[string]any)
	if o["strategy"] != "latency" || len(o["fallbacks"].([]any)) != 2 || o["aliases"].([]any)[0] != "gpt4" || o["max_attempts"] != 3.0 ||
		o["context_fallbacks"].([]any)[0] != "gpt-4.1" {
		t.Errorf("json options = %v", o)
	}
	d := m["deployments"].([]any)[0].(map[string]any)
	if d["options"].(map[string]any)["api_version"] != "2024-10-21" || d["first_token_timeout_ms"] != 2500.0 {
		t.Errorf("json deployment = %v", d)
	}

	// list: the deployments, then the routes with routing options.
	r = f.mustRun(t, "model", "list")
	parts := strings.Split(strings.TrimSpace(r.stdout), "\n\n")
	if len(parts) != 2 {
		t.Fatalf("want two tables:\n%s", r.stdout)
	}
	deps := strings.Split(parts[0], "\n")
	if got := strings.Fields(deps[1]); !slices.Equal(got, []string{"gpt-4.1", "openai", "openai", "gpt-4.1", routing.OpenAIBaseURL, "1", "0", "-", "-", "-", "-"}) {
		t.Errorf("row = %v", got)
	}
	if got := strings.Fields(deps[2]); !slices.Equal(got, []string{"gpt-4o", "azure", "azure-openai", "gpt-4o", "https://res.openai.azure.com",
		"1", "0", "-", "2.5s", "api_version=2024-10-21", "60rpm"}) {
		t.Errorf("row = %v", got)
	}
	opts := strings.Split(parts[1], "\n")
	if len(opts) != 2 {
		t.Fatalf("routing options table:\n%s", parts[1])
	}
	if got := strings.Fields(opts[0]); !slices.Equal(got, []string{"MODEL", "STRATEGY", "FALLBACKS", "CONTEXT-FALLBACKS", "ALIASES", "MAX-ATTEMPTS"}) {
		t.Errorf("header = %v", got)
	}
	if got := strings.Fields(opts[1]); !slices.Equal(got, []string{"gpt-4o", "latency", "gpt-4o-mini,gpt-4.1", "gpt-4.1", "gpt4", "3"}) {
		t.Errorf("row = %v", got)
	}

	routes := decodeArray(t, f.mustRun(t, "model", "list", "-o", "json").stdout)
	if len(routes) != 3 {
		t.Fatalf("json = %v", routes)
	}
	// Routes without routing options still have the same keys.
	if o, ok := routes[0]["options"].(map[string]any); !ok || o["strategy"] != "" || len(o["fallbacks"].([]any)) != 0 {
		t.Errorf("json options of %s = %v", routes[0]["name"], routes[0]["options"])
	}
	if o := routes[1]["options"].(map[string]any); o["strategy"] != "latency" {
		t.Errorf("json options of %s = %v", routes[1]["name"], o)
	}
}

func TestModelRoute(t *testing.T) {
	f := startFake(t)
	for _, m := range []string{"gpt-4o", "gpt-4o-mini", "gpt-4.1", "claude"} {
		f.mustRun(t, "model", "add", m, "--provider", "demo")
	}
	f.models.takeCalls()
	opts := func() *tollgatev1.RouteOptions { return f.models.get("gpt-4o").GetOptions() }
	lastSent := func() *tollgatev1.RouteOptions {
		_, req, _ := f.models.lastRequests()
		return req.GetOptions()
	}

	r := f.mustRun(t, "model", "route", "gpt-4o", "--strategy", "cost", "--fallback", "gpt-4o-mini", "--fallback", "claude",
		"--context-fallback", "gpt-4.1", "--alias", "gpt4,gpt-4o-latest", "--max-attempts", "4")
	want := &tollgatev1.RouteOptions{Strategy: "cost", Fallbacks: []string{"gpt-4o-mini", "claude"}, ContextFallbacks: []string{"gpt-4.1"},
		Aliases: []string{"gpt4", "gpt-4o-latest"}, MaxAttempts: 4}
	if !proto.Equal(opts(), want) {
		t.Errorf("options = %v, want %v", opts(), want)
	}
	if calls := f.models.takeCalls(); !slices.Equal(calls, []string{"GetModel", "SetRouteOptions"}) {
		t.Errorf("calls = %v", calls)
	}
	if !strings.HasPrefix(r.stdout, "Set the routing options of model gpt-4o.\n\nModel gpt-4o") ||
		!strings.Contains(r.stdout, "Fallbacks:          gpt-4o-mini, claude\n") {
		t.Errorf("output:\n%s", r.stdout)
	}

	// Only the given options change; a list flag replaces its list.
	f.mustRun(t, "model", "route", "gpt-4o", "--fallback", "gpt-4.1")
	want.Fallbacks = []string{"gpt-4.1"}
	if !proto.Equal(lastSent(), want) || !proto.Equal(opts(), want) {
		t.Errorf("--fallback sent %v, want %v", lastSent(), want)
	}
	f.mustRun(t, "model", "route", "gpt-4o", "--fallback", "", "--no-aliases", "--strategy", "")
	want.Fallbacks, want.Aliases, want.Strategy = nil, nil, ""
	if !proto.Equal(lastSent(), want) {
		t.Errorf("clearing sent %v, want %v", lastSent(), want)
	}
	f.mustRun(t, "model", "route", "gpt-4o", "--no-context-fallbacks", "--no-fallbacks", "--alias", "gpt4")
	want.ContextFallbacks, want.Aliases = nil, []string{"gpt4"}
	if !proto.Equal(lastSent(), want) {
		t.Errorf("sent %v, want %v", lastSent(), want)
	}

	// --clear starts from nothing, without reading the route.
	f.models.takeCalls()
	r = f.mustRun(t, "model", "route", "gpt-4o", "--clear")
	if !proto.Equal(lastSent(), &tollgatev1.RouteOptions{}) || opts() != nil {
		t.Errorf("--clear sent %v, stored %v", lastSent(), opts())
	}
	if !strings.HasPrefix(r.stdout, "Reset the routing options of model gpt-4o to the defaults.") {
		t.Errorf("output:\n%s", r.stdout)
	}
	f.mustRun(t, "model", "route", "gpt-4o", "--clear", "--max-attempts", "2")
	if !proto.Equal(lastSent(), &tollgatev1.RouteOptions{MaxAttempts: 2}) {
		t.Errorf("--clear --max-attempts sent %v", lastSent())
	}
	if calls := f.models.takeCalls(); !slices.Equal(calls, []string{"SetRouteOptions", "SetRouteOptions"}) {
		t.Errorf("calls = %v", calls)
	}

	// Without flags the route is shown and nothing changes.
	r = f.mustRun(t, "model", "route", "gpt-4o")
	if calls := f.models.takeCalls(); !slices.Equal(calls, []string{"GetModel"}) || !strings.Contains(r.stdout, "Max attempts:       2\n") {
		t.Errorf("calls = %v, output:\n%s", calls, r.stdout)
	}

	m := decodeObject(t, f.mustRun(t, "model", "route", "gpt-4o", "--alias", "four", "-o", "json").stdout)
	if o := m["options"].(map[string]any); m["name"] != "gpt-4o" || o["aliases"].([]any)[0] != "four" || o["max_attempts"] != 2.0 {
		t.Errorf("json = %v", m)
	}

	// The strategy is checked by the server, not by tollctl.
	r = f.run(t, "model", "route", "gpt-4o", "--strategy", "round-robin")
	if _, req, _ := f.models.lastRequests(); r.code != 1 || !strings.Contains(r.stderr, `unknown strategy "round-robin"`) ||
		req.GetOptions().GetStrategy() != "round-robin" {
		t.Errorf("unknown strategy: exit %d stderr %q", r.code, r.stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"gpt-4o", "--fallback", "nope"}, `fallback model "nope" does not exist`},
		{[]string{"nope", "--max-attempts", "2"}, "model nope not found"},
		{[]string{"nope", "--clear"}, "model nope not found"},
		{[]string{"gpt-4o", "--max-attempts", "11"}, "at most 10"},
	} {
		if r := f.run(t, append([]string{"model", "route"}, c.args...)...); r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}

	f.models.takeCalls()
	for _, args := range [][]string{
		{"model", "route"},
		{"model", "route", "a", "b"},
		{"model", "route", "gpt-4o", "--fallback", "x", "--no-fallbacks"},
		{"model", "route", "gpt-4o", "--alias", "x", "--no-aliases"},
		{"model", "route", "gpt-4o", "--context-fallback", "x", "--no-context-fallbacks"},
		{"model", "route", "gpt-4o", "--max-attempts", "-1"},
		{"model", "route", "gpt-4o", "--max-attempts", "many"},
	} {
		if r := f.run(t, args...); r.code != 2 || !strings.Contains(r.stderr, "--help") {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if calls := f.models.takeCalls(); len(calls) != 0 {
		t.Errorf("invalid input reached the server: %v", calls)
	}
}

func TestModelTest(t *testing.T) {
	f := startFake(t)
	f.mustRun(t, "model", "add", "gpt-4o", "--provider", "openai", "--deployment", "openai-east")

	r := f.mustRun(t, "model", "test", "gpt-4o")
	want := "model gpt-4o: 200 from deployment openai-east (openai) in 412 ms after 1 attempt(s); 9 prompt + 12 completion tokens\n" +
		"Hello! How can I help?\n"
	if r.stdout != want || r.stderr != "" {
		t.Errorf("output %q, stderr %q; want %q", r.stdout, r.stderr, want)
	}
	if _, _, req := f.models.lastRequests(); !proto.Equal(req, &tollgatev1.TestModelRequest{Model: "gpt-4o"}) {
		t.Errorf("sent %v", req)
	}
	f.mustRun(t, "model", "test", "gpt-4o", "--prompt", "Say ok.", "--stream")
	if _, _, req := f.models.lastRequests(); !proto.Equal(req, &tollgatev1.TestModelRequest{Model: "gpt-4o", Prompt: "Say ok.", Stream: true}) {
		t.Errorf("sent %v", req)
	}

	m := decodeObject(t, f.mustRun(t, "model", "test", "gpt-4o", "-o", "json").stdout)
	if m["status"] != 200.0 || m["deployment"] != "openai-east" || m["latency_ms"] != "412" || m["attempts"] != 1.0 ||
		m["reply"] != "Hello! How can I help?" || m["prompt_tokens"] != "9" || m["route"] != "gpt-4o" {
		t.Errorf("json = %v", m)
	}

	// Another route answered (a fallback).
	f.models.setTestResponse(&tollgatev1.TestModelResponse{Status: 200, Route: "gpt-4o-mini", Deployment: "mini", Provider: "openai",
		Attempts: 3, LatencyMs: 950, Reply: "Hi", PromptTokens: 9, CompletionTokens: 1})
	r = f.mustRun(t, "model", "test", "gpt-4o")
	if first := strings.SplitN(r.stdout, "\n", 2)[0]; first != "model gpt-4o: 200 from deployment mini (openai) of model gpt-4o-mini in 950 ms after 3 attempt(s); 9 prompt + 1 completion tokens" {
		t.Errorf("first line %q", first)
	}

	// A failure prints the details and exits 1.
	f.models.setTestResponse(&tollgatev1.TestModelResponse{Status: 502, Route: "gpt-4o", Deployment: "openai-east", Provider: "openai",
		Attempts: 2, LatencyMs: 31, Reply: "upstream returned 500: internal error"})
	r = f.run(t, "model", "test", "gpt-4o")
	want = "model gpt-4o: 502 from deployment openai-east (openai) in 31 ms after 2 attempt(s)\nupstream returned 500: internal error\n"
	if r.code != 1 || r.stdout != want || r.stderr != "tollctl: test of model gpt-4o failed with status 502\n" {
		t.Errorf("failure: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = f.run(t, "model", "test", "gpt-4o", "-o", "json")
	if m := decodeObject(t, r.stdout); r.code != 1 || m["status"] != 502.0 || !strings.Contains(r.stderr, "status 502") {
		t.Errorf("json failure: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// No deployment could be tried.
	f.models.setTestResponse(&tollgatev1.TestModelResponse{Status: 429, Route: "gpt-4o", LatencyMs: 1, Reply: "all deployments are at their rate limits"})
	r = f.run(t, "model", "test", "gpt-4o")
	if first := strings.SplitN(r.stdout, "\n", 2)[0]; r.code != 1 || first != "model gpt-4o: 429 in 1 ms after 0 attempt(s)" {
		t.Errorf("no deployment: exit %d first line %q", r.code, first)
	}

	if r := f.run(t, "model", "test", "nope"); r.code != 1 || r.stderr != "tollctl: model nope not found\n" {
		t.Errorf("unknown model: exit %d stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"model", "test"}, {"model", "test", "a", "b"}, {"model", "test", "a", "--stream=maybe"}} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2", args, r.code)
		}
	}
}
