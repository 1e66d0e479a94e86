package translate

// Golden files live in testdata/gemini. GEMINI_UPDATE_GOLDEN=1 rewrites the
// expected documents from the current output (review the diff before
// keeping it).

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

const geminiTestdata = "testdata/gemini"

func geminiUpdating() bool { return os.Getenv("GEMINI_UPDATE_GOLDEN") != "" }

var (
	geminiCreatedRE     = regexp.MustCompile(`"created": \d+`)
	geminiGeneratedIDRE = regexp.MustCompile(`"chatcmpl-gem-[A-Za-z0-9]+"`)
	geminiCallIDRE      = regexp.MustCompile(`^call_[0-9a-f]{16}_(\d+)$`)
)

// geminiNormalize decodes a JSON document and clears what varies between
// runs: "created" timestamps and generated ids.
func geminiNormalize(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["created"]; ok {
				x["created"] = 0
			}
			if id, ok := x["id"].(string); ok && strings.HasPrefix(id, "chatcmpl-gem-") {
				x["id"] = "chatcmpl-gem-*"
			}
			// Tool-call ids made from the answer's id: the hash varies with
			// a generated answer id.
			if id, ok := x["id"].(string); ok && geminiCallIDRE.MatchString(id) {
				x["id"] = geminiCallIDRE.ReplaceAllString(id, "call_*_$1")
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return v
}

// geminiGolden compares the JSON document got with the golden file path,
// ignoring key order and formatting.
func geminiGolden(t *testing.T, got []byte, path string) {
	t.Helper()
	if geminiUpdating() {
		var buf bytes.Buffer
		if err := json.Indent(&buf, got, "", "  "); err != nil {
			t.Fatalf("indenting %s: %v", path, err)
		}
		buf.WriteByte('\n')
		// Store what varies between runs the way geminiNormalize sees it.
		out := geminiCreatedRE.ReplaceAll(buf.Bytes(), []byte(`"created": 0`))
		out = geminiGeneratedIDRE.ReplaceAll(out, []byte(`"chatcmpl-gem-*"`))
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v", err)
	}
	if g, w := geminiNormalize(t, got), geminiNormalize(t, want); !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("%s differs\n--- got\n%s\n--- want\n%s", path, gi, wi)
	}
}

func geminiCases(t *testing.T, dir, suffix string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(geminiTestdata, dir, "*"+suffix))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s fixtures in %s: %v", suffix, dir, err)
	}
	return files
}

func geminiReadBody(t *testing.T, r *http.Request) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func geminiAsError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *translate.Error", err, err)
	}
	return e
}

// --- request ---

func TestGeminiRequestGolden(t *testing.T) {
	for _, in := range geminiCases(t, "request", ".in.json") {
		name := strings.TrimSuffix(filepath.Base(in), ".in.json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var req ChatRequest
			if err := json.Unmarshal(raw, &req); err != nil {
				t.Fatal(err)
			}
			tgt := &Target{Provider: "gemini", Credential: "test-key"}
			r, err := Gemini.NewRequest(&req, tgt, false)
			if err != nil {
				t.Fatalf("NewRequest: %v", err)
			}
			body := geminiReadBody(t, r)
			geminiGolden(t, body, strings.TrimSuffix(in, ".in.json")+".out.json")

			// The streaming request carries the same body.
			rs, err := Gemini.NewRequest(&req, tgt, true)
			if err != nil {
				t.Fatalf("NewRequest(stream): %v", err)
			}
			if sb := geminiReadBody(t, rs); !bytes.Equal(sb, body) {
				t.Errorf("stream body differs:\n%s\n%s", sb, body)
			}
		})
	}
}

func TestGeminiEndpoints(t *testing.T) {
	req := &ChatRequest{Model: "client-model", Messages: []Message{{Role: "user", Content: TextContent("hi")}}}
	cases := []struct {
		name      string
		target    Target
		stream    bool
		wantURL   string
		wantKey   string // x-goog-api-key
		wantAuthz string // Authorization
	}{
		{
			name:    "studio default base",
			target:  Target{UpstreamModel: "gemini-2.5-flash", Credential: "AIza-test"},
			wantURL: "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
			wantKey: "AIza-test",
		},
		{
			name:    "studio stream",
			target:  Target{UpstreamModel: "gemini-2.5-flash", Credential: "AIza-test"},
			stream:  true,
			wantURL: "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
			wantKey: "AIza-test",
		},
		{
			name:    "studio custom base, model with prefix",
			target:  Target{BaseURL: "http://127.0.0.1:8080/v1beta/", UpstreamModel: "models/gemini-2.0-flash", Credential: "k"},
			wantURL: "http://127.0.0.1:8080/v1beta/models/gemini-2.0-flash:generateContent",
			wantKey: "k",
		},
		{
			name:    "studio tuned model, requested model when no upstream model",
			target:  Target{Credential: "k", Options: map[string]string{"vertex_location": "ignored-without-project"}},
			wantURL: "https://generativelanguage.googleapis.com/v1beta/models/client-model:generateContent",
			wantKey: "k",
		},
		{
			name:    "studio tuned model",
			target:  Target{UpstreamModel: "tunedModels/my-tune-1", Credential: "k"},
			wantURL: "https://generativelanguage.googleapis.com/v1beta/tunedModels/my-tune-1:generateContent",
			wantKey: "k",
		},
		{
			name:      "vertex default location",
			target:    Target{UpstreamModel: "gemini-2.5-pro", Credential: "ya29.token", Options: map[string]string{"vertex_project": "my-project"}},
			wantURL:   "https://us-central1-aiplatform.googleapis.com/v1/projects/my-project/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent",
			wantAuthz: "Bearer ya29.token",
		},
		{
			name:      "vertex stream in a region",
			target:    Target{UpstreamModel: "publishers/google/models/gemini-2.5-pro", Credential: "ya29.token", Options: map[string]string{"vertex_project": "my-project", "vertex_location": "europe-west4"}},
			stream:    true,
			wantURL:   "https://europe-west4-aiplatform.googleapis.com/v1/projects/my-project/locations/europe-west4/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
			wantAuthz: "Bearer ya29.token",
		},
		{
			name:      "vertex global",
			target:    Target{UpstreamModel: "gemini-3-pro-preview", Credential: "tok", Options: map[string]string{"vertex_project": "p-1", "vertex_location": "global"}},
			wantURL:   "https://aiplatform.googleapis.com/v1/projects/p-1/locations/global/publishers/google/models/gemini-3-pro-preview:generateContent",
			wantAuthz: "Bearer tok",
		},
		{
			name:      "vertex custom base",
			target:    Target{BaseURL: "https://vertex-proxy.internal/v1", UpstreamModel: "gemini-2.5-flash", Credential: "tok", Options: map[string]string{"vertex_project": "p", "vertex_location": "asia-northeast1"}},
			wantURL:   "https://vertex-proxy.internal/v1/projects/p/locations/asia-northeast1/publishers/google/models/gemini-2.5-flash:generateContent",
			wantAuthz: "Bearer tok",
		},
		{
			name:    "no credential, no auth header",
			target:  Target{UpstreamModel: "gemini-2.5-flash"},
			wantURL: "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Gemini.NewRequest(req, &c.target, c.stream)
			if err != nil {
				t.Fatal(err)
			}
			if r.Method != http.MethodPost {
				t.Errorf("method %s", r.Method)
			}
			if got := r.URL.String(); got != c.wantURL {
				t.Errorf("URL\n got %s\nwant %s", got, c.wantURL)
			}
			if got := r.Header.Get("x-goog-api-key"); got != c.wantKey {
				t.Errorf("x-goog-api-key %q, want %q", got, c.wantKey)
			}
			if got := r.Header.Get("Authorization"); got != c.wantAuthz {
				t.Errorf("Authorization %q, want %q", got, c.wantAuthz)
			}
			if got := r.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			wantAccept := "application/json"
			if c.stream {
				wantAccept = "text/event-stream"
			}
			if got := r.Header.Get("Accept"); got != wantAccept {
				t.Errorf("Accept %q, want %q", got, wantAccept)
			}
			if r.GetBody == nil || r.ContentLength <= 0 {
				t.Errorf("the request body cannot be replayed (GetBody %v, length %d)", r.GetBody != nil, r.ContentLength)
			}
		})
	}

	// A location that is not a Google Cloud location is a configuration
	// error, never a URL with someone else's host.
	_, err := Gemini.NewRequest(req, &Target{UpstreamModel: "m", Options: map[string]string{"vertex_project": "p", "vertex_location": "evil.com/x"}}, false)
	if err == nil {
		t.Fatal("a bad vertex_location was accepted")
	}
}

func TestGeminiVertexBaseURL(t *testing.T) {
	for loc, want := range map[string]string{
		"":            "https://us-central1-aiplatform.googleapis.com/v1",
		"us-east5":    "https://us-east5-aiplatform.googleapis.com/v1",
		"global":      "https://aiplatform.googleapis.com/v1",
		"europe-west": "https://europe-west-aiplatform.googleapis.com/v1",
	} {
		if got := GeminiVertexBaseURL(loc); got != want {
			t.Errorf("GeminiVertexBaseURL(%q) = %q, want %q", loc, got, want)
		}
	}
}

func TestGeminiRequestRefusals(t *testing.T) {
	user := Message{Role: "user", Content: TextContent("hi")}
	two, zero, yes, no := int64(2), int64(0), true, false
	call := func(id, name, args string) Message {
		return Message{Role: "assistant", ToolCalls: []ToolCall{{ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: args}}}}
	}
	cases := []struct {
		name      string
		req       ChatRequest
		wantParam string
		wantCode  string
	}{
		{"n>1", ChatRequest{N: &two, Messages: []Message{user}}, "n", "unsupported_parameter"},
		{"n=0", ChatRequest{N: &zero, Messages: []Message{user}}, "n", "invalid_request"},
		{"logprobs", ChatRequest{Logprobs: &yes, Messages: []Message{user}}, "logprobs", "unsupported_parameter"},
		{"input_audio", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(
			Part{Type: "text", Text: "listen"}, Part{Type: "input_audio", InputAudio: json.RawMessage(`{"data":"AAAA","format":"wav"}`)})}}},
			"messages[0].content[1].input_audio", "unsupported_parameter"},
		{"file", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "file", File: json.RawMessage(`{"file_id":"file-1"}`)})}}},
			"messages[0].content[0].file", "unsupported_parameter"},
		{"unknown part", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "video"})}}},
			"messages[0].content[0].type", "invalid_request"},
		{"image without url", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "image_url"})}}},
			"messages[0].content[0].image_url", "invalid_request"},
		{"non-base64 data url", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png,rawbytes"}})}}},
			"messages[0].content[0].image_url.url", "invalid_request"},
		{"ftp image", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "image_url", ImageURL: &ImageURL{URL: "ftp://example.com/a.png"}})}}},
			"messages[0].content[0].image_url.url", "invalid_request"},
		{"image in system", ChatRequest{Messages: []Message{{Role: "system", Content: PartsContent(Part{Type: "image_url", ImageURL: &ImageURL{URL: "https://a/b.png"}})}, user}},
			"messages[0].content[0]", "invalid_request"},
		{"invalid tool arguments", ChatRequest{Messages: []Message{user, call("c1", "f", `{"a":`)}}, "messages[1].tool_calls[0].function.arguments", "invalid_request"},
		{"array tool arguments", ChatRequest{Messages: []Message{user, call("c1", "f", `[1,2]`)}}, "messages[1].tool_calls[0].function.arguments", "invalid_request"},
		{"null tool arguments", ChatRequest{Messages: []Message{user, call("c1", "f", `null`)}}, "messages[1].tool_calls[0].function.arguments", "invalid_request"},
		{"nameless tool call", ChatRequest{Messages: []Message{user, call("c1", "", `{}`)}}, "messages[1].tool_calls[0].function.name", "invalid_request"},
		{"unknown tool_call_id", ChatRequest{Messages: []Message{user, call("c1", "f", `{}`), {Role: "tool", ToolCallID: "c2", Content: TextContent("x")}}},
			"messages[2].tool_call_id", "invalid_request"},
		{"image in tool result", ChatRequest{Messages: []Message{user, call("c1", "f", `{}`),
			{Role: "tool", ToolCallID: "c1", Content: PartsContent(Part{Type: "image_url", ImageURL: &ImageURL{URL: "https://a/b.png"}})}}},
			"messages[2].content[0].image_url", "unsupported_parameter"},
		{"function message without name", ChatRequest{Messages: []Message{user, {Role: "function", Content: TextContent("x")}}}, "messages[1].name", "invalid_request"},
		{"unknown role", ChatRequest{Messages: []Message{{Role: "critic", Content: TextContent("x")}}}, "messages[0].role", "invalid_request"},
		{"only a system message", ChatRequest{Messages: []Message{{Role: "system", Content: TextContent("be nice")}}}, "messages", "invalid_request"},
		{"no messages", ChatRequest{}, "messages", "invalid_request"},
		{"non-function tool", ChatRequest{Messages: []Message{user}, Tools: []Tool{{Type: "code_interpreter"}}}, "tools[0].type", "unsupported_parameter"},
		{"nameless tool", ChatRequest{Messages: []Message{user}, Tools: []Tool{{Type: "function"}}}, "tools[0].function.name", "invalid_request"},
		{"recursive schema", ChatRequest{Messages: []Message{user}, Tools: []Tool{{Type: "function", Function: FunctionDecl{Name: "f",
			Parameters: json.RawMessage(`{"type":"object","properties":{"node":{"$ref":"#/$defs/Node"}},"$defs":{"Node":{"type":"object","properties":{"next":{"$ref":"#/$defs/Node"}}}}}`)}}}},
			"tools[0].function.parameters", "invalid_request"},
		{"dangling $ref", ChatRequest{Messages: []Message{user}, Tools: []Tool{{Type: "function", Function: FunctionDecl{Name: "f",
			Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/$defs/Missing"}}}`)}}}},
			"tools[0].function.parameters", "invalid_request"},
		{"remote $ref", ChatRequest{Messages: []Message{user}, Tools: []Tool{{Type: "function", Function: FunctionDecl{Name: "f",
			Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/schema.json"}}}`)}}}},
			"tools[0].function.parameters", "invalid_request"},
		{"schema not an object", ChatRequest{Messages: []Message{user}, Tools: []Tool{{Type: "function", Function: FunctionDecl{Name: "f",
			Parameters: json.RawMessage(`[1]`)}}}},
			"tools[0].function.parameters", "invalid_request"},
		{"unknown tool_choice", ChatRequest{Messages: []Message{user}, Tools: []Tool{{Type: "function", Function: FunctionDecl{Name: "f"}}}, ToolChoice: &ToolChoice{Mode: "sometimes"}},
			"tool_choice", "invalid_request"},
		{"unknown response_format", ChatRequest{Messages: []Message{user}, ResponseFormat: json.RawMessage(`{"type":"xml"}`)}, "response_format.type", "invalid_request"},
		{"malformed response_format", ChatRequest{Messages: []Message{user}, ResponseFormat: json.RawMessage(`"json"`)}, "response_format", "invalid_request"},
		{"bad json_schema", ChatRequest{Messages: []Message{user}, ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{"$ref":"#/nowhere"}}}`)},
			"response_format.json_schema.schema", "invalid_request"},
		{"max_tokens 0", ChatRequest{Messages: []Message{user}, MaxTokens: &zero}, "max_tokens", "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.Model = "gemini-2.5-flash"
			r, err := Gemini.NewRequest(&c.req, &Target{}, false)
			if err == nil {
				t.Fatalf("accepted; body %s", geminiReadBody(t, r))
			}
			e := geminiAsError(t, err)
			if e.Param != c.wantParam || e.Code != c.wantCode || e.Status != http.StatusBadRequest || e.Kind != KindInvalidRequest {
				t.Errorf("got param %q code %q status %d kind %d (%s); want param %q code %q 400",
					e.Param, e.Code, e.Status, e.Kind, e.Message, c.wantParam, c.wantCode)
			}
			if e.Message == "" {
				t.Error("the refusal has no message")
			}
		})
	}

	// A replayed assistant refusal part is accepted (and carries no text).
	refusal := ChatRequest{Model: "m", Messages: []Message{user, {Role: "assistant", Refusal: "I can't.", Content: PartsContent(Part{Type: "refusal"})}}}
	r, err := Gemini.NewRequest(&refusal, &Target{}, false)
	if err != nil {
		t.Fatalf("refusal part refused: %v", err)
	}
	if body := string(geminiReadBody(t, r)); !strings.Contains(body, `{"role":"model","parts":[{"text":"I can't."}]}`) {
		t.Errorf("refusal not replayed as model text: %s", body)
	}

	// logprobs:false asks for nothing and is accepted.
	if _, err := Gemini.NewRequest(&ChatRequest{Model: "m", Logprobs: &no, Messages: []Message{user}}, &Target{}, false); err != nil {
		t.Errorf("logprobs false refused: %v", err)
	}
}

// TestGeminiSchemaRules checks schema rewrites the tools golden file does
// not show.
func TestGeminiSchemaRules(t *testing.T) {
	cases := []struct{ in, want string }{
		// A true schema is unconstrained; several types become anyOf.
		{`{"type":"object","properties":{"any":true,"multi":{"type":["string","integer","null"]}}}`,
			`{"type":"object","properties":{"any":{},"multi":{"nullable":true,"anyOf":[{"type":"string"},{"type":"integer"}]}}}`},
		// oneOf becomes anyOf; #/definitions refs resolve; ~1 escapes "/".
		{`{"type":"object","properties":{"v":{"oneOf":[{"$ref":"#/definitions/a~1b"},{"type":"integer"}]}},"definitions":{"a/b":{"type":"string","maxLength":3}}}`,
			`{"type":"object","properties":{"v":{"anyOf":[{"type":"string","maxLength":3},{"type":"integer"}]}}}`},
		// Tuple items cannot be expressed and are dropped; mixed enums too.
		{`{"type":"array","items":[{"type":"string"}],"enum":["a",1]}`, `{"type":"array"}`},
		// A lone nullable alternative folds into its sibling.
		{`{"anyOf":[{"type":"number","format":"double"},{"type":"null"}],"description":"d"}`,
			`{"type":"number","format":"double","nullable":true,"description":"d"}`},
		{`null`, `null`},
	}
	for _, c := range cases {
		got, err := geminiSchema(json.RawMessage(c.in))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		b, _ := json.Marshal(got)
		if !reflect.DeepEqual(geminiNormalize(t, b), geminiNormalize(t, []byte(c.want))) {
			t.Errorf("%s\n got %s\nwant %s", c.in, b, c.want)
		}
	}
	if _, err := geminiSchema(json.RawMessage(`{"type":"object","properties":{"x":false}}`)); err == nil {
		t.Error("a false schema was accepted")
	}
	if _, err := geminiSchema(json.RawMessage(`{"type":[1]}`)); err == nil {
		t.Error("a numeric type was accepted")
	}
}

// TestGeminiSignatures checks that only Gemini 3 and later get the
// placeholder thought signature.
func TestGeminiSignatures(t *testing.T) {
	for model, want := range map[string]bool{
		"gemini-3-pro-preview":                     true,
		"gemini-3.1-flash":                         true,
		"models/gemini-10-ultra":                   true,
		"publishers/google/models/gemini-3-flash":  true,
		"gemini-2.5-pro":                           false,
		"gemini-2.0-flash-001":                     false,
		"learnlm-2.0-flash-experimental":           false,
		"my-gemini-3-proxy-alias-without-a-prefix": false,
	} {
		if got := geminiNeedsSignatures(model); got != want {
			t.Errorf("geminiNeedsSignatures(%q) = %v, want %v", model, got, want)
		}
	}
}

// --- response ---

func TestGeminiResponseGolden(t *testing.T) {
	for _, in := range geminiCases(t, "response", ".json") {
		if strings.HasSuffix(in, ".want.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := Gemini.ParseResponse(body, "client-model")
			if err != nil {
				t.Fatalf("ParseResponse: %v", err)
			}
			if resp.Created == 0 {
				t.Error("created is not set")
			}
			got, err := json.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			geminiGolden(t, got, strings.TrimSuffix(in, ".json")+".want.json")
		})
	}
}

func TestGeminiResponseDetails(t *testing.T) {
	// Vertex's createTime becomes created.
	body, err := os.ReadFile(filepath.Join(geminiTestdata, "response", "vertex_max_tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Gemini.ParseResponse(body, "m")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Created != 1738675896 {
		t.Errorf("created %d, want createTime 1738675896", resp.Created)
	}
	// Without responseId an id is generated, unique per answer.
	a, err := Gemini.ParseResponse([]byte(`{"candidates":[{"content":{"parts":[{"text":"x"}]}}]}`), "m")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Gemini.ParseResponse([]byte(`{"candidates":[{"content":{"parts":[{"text":"x"}]}}]}`), "m")
	if !strings.HasPrefix(a.ID, "chatcmpl-gem-") || a.ID == b.ID {
		t.Errorf("generated ids %q and %q", a.ID, b.ID)
	}
	if a.Usage != nil {
		t.Errorf("usage %+v without usageMetadata", a.Usage)
	}
	if a.Choices[0].FinishReason != FinishStop {
		t.Errorf("finish %q without finishReason", a.Choices[0].FinishReason)
	}
	// Other finish reasons end as stop; with a call, as tool_calls.
	for reason, want := range map[string]string{
		"OTHER": FinishStop, "MALFORMED_FUNCTION_CALL": FinishStop, "LANGUAGE": FinishStop,
		"RECITATION": FinishContentFilter, "BLOCKLIST": FinishContentFilter, "PROHIBITED_CONTENT": FinishContentFilter, "SPII": FinishContentFilter,
	} {
		r, err := Gemini.ParseResponse([]byte(`{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"`+reason+`"}]}`), "m")
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Choices[0].FinishReason; got != want {
			t.Errorf("%s → %s, want %s", reason, got, want)
		}
	}
	// Total falls back to the sum when Gemini leaves it out.
	r, err := Gemini.ParseResponse([]byte(`{"candidates":[{"content":{"parts":[{"text":"x"}]}}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"thoughtsTokenCount":3}}`), "m")
	if err != nil {
		t.Fatal(err)
	}
	if u := r.Usage; u.PromptTokens != 5 || u.CompletionTokens != 5 || u.TotalTokens != 10 || u.PromptTokensDetails != nil {
		t.Errorf("usage %+v", u)
	}
}

func TestGeminiResponseMalformed(t *testing.T) {
	for _, body := range []string{
		``,
		`not json`,
		`[]`,
		`null`,
		`{}`,
		`{"candidates":[]}`,
		`{"candidates":{}}`,
		`{"candidates":[{"content":{"parts":"text"}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":[1,2]}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":"x"}}]}}]}`,
		`{"usageMetadata":{"promptTokenCount":"many"}}`,
		`{"candidates":[{"content":{"parts":[{"text":"x"}]}}]} trailing`,
	} {
		resp, err := Gemini.ParseResponse([]byte(body), "m")
		if err == nil {
			t.Errorf("%q: accepted as %+v", body, resp)
			continue
		}
		if e := geminiAsError(t, err); e.Kind != KindBadResponse || e.Status != http.StatusBadGateway {
			t.Errorf("%q: kind %d status %d, want a bad response", body, e.Kind, e.Status)
		}
	}
	// An error object inside a 200 is classified like an error answer.
	_, err := Gemini.ParseResponse([]byte(`{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`), "m")
	if e := geminiAsError(t, err); e.Kind != KindOverloaded || e.Status != http.StatusServiceUnavailable {
		t.Errorf("error in 200: kind %d status %d", e.Kind, e.Status)
	}
}

// --- stream ---

// geminiDrain reads a stream to its end and returns the chunks as a JSON
// array and the final error.
func geminiDrain(t *testing.T, d StreamDecoder) ([]*Chunk, error) {
	t.Helper()
	var chunks []*Chunk
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("the decoder does not end")
		}
		c, err := d.Next()
		if err != nil {
			return chunks, err
		}
		if c == nil {
			t.Fatal("nil chunk without an error")
		}
		chunks = append(chunks, c)
	}
}

func TestGeminiStreamGolden(t *testing.T) {
	for _, in := range geminiCases(t, "stream", ".sse") {
		name := strings.TrimSuffix(filepath.Base(in), ".sse")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := geminiDrain(t, Gemini.NewStreamDecoder(bytes.NewReader(body), "client-model"))
			if err != io.EOF {
				t.Fatalf("stream ended with %v, want io.EOF", err)
			}
			got, err := json.Marshal(chunks)
			if err != nil {
				t.Fatal(err)
			}
			geminiGolden(t, got, strings.TrimSuffix(in, ".sse")+".want.json")

			// Fed one byte at a time, or in odd pieces, the stream decodes
			// the same.
			for rname, r := range map[string]io.Reader{
				"one byte": iotest.OneByteReader(bytes.NewReader(body)),
				"halves":   iotest.HalfReader(bytes.NewReader(body)),
				"data+EOF": iotest.DataErrReader(bytes.NewReader(body)),
			} {
				again, err := geminiDrain(t, Gemini.NewStreamDecoder(r, "client-model"))
				if err != io.EOF {
					t.Fatalf("%s: ended with %v", rname, err)
				}
				b, _ := json.Marshal(again)
				if !reflect.DeepEqual(geminiNormalize(t, b), geminiNormalize(t, got)) {
					t.Errorf("%s: decoded differently:\n%s\n%s", rname, b, got)
				}
			}
		})
	}
}

func TestGeminiStreamShape(t *testing.T) {
	body, err := os.ReadFile(filepath.Join(geminiTestdata, "stream", "function_call.sse"))
	if err != nil {
		t.Fatal(err)
	}
	d := Gemini.NewStreamDecoder(bytes.NewReader(body), "m")
	chunks, err := geminiDrain(t, d)
	if err != io.EOF {
		t.Fatal(err)
	}
	// Every chunk of one stream has the same id and created.
	for _, c := range chunks {
		if c.ID != chunks[0].ID || c.Created != chunks[0].Created || c.Object != "chat.completion.chunk" || c.Model != "m" {
			t.Errorf("chunk %+v does not match the first", c)
		}
	}
	if chunks[0].Choices[0].Delta.Role != "assistant" {
		t.Error("the first chunk does not carry the role")
	}
	last := chunks[len(chunks)-1]
	if last.Usage == nil || len(last.Choices) != 0 {
		t.Errorf("the last chunk is not a usage chunk: %+v", last)
	}
	// After the end, Next keeps answering io.EOF.
	for range 3 {
		if c, err := d.Next(); c != nil || err != io.EOF {
			t.Fatalf("after the end: %v, %v", c, err)
		}
	}
}

func TestGeminiStreamErrors(t *testing.T) {
	text := `data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}],"responseId":"r1"}` + "\n\n"
	cases := []struct {
		name       string
		body       string
		wantChunks int
		wantKind   ErrorKind
		wantStatus int
	}{
		{"error event mid-stream", text + `data: {"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}` + "\n\n",
			1, KindRateLimited, http.StatusTooManyRequests},
		{"error event first", `data: {"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}` + "\r\n\r\n",
			0, KindOverloaded, http.StatusInternalServerError},
		{"error event without code", `data: {"error":{"message":"stream broke"}}` + "\n\n", 0, KindOther, http.StatusBadGateway},
		{"malformed event", text + "data: {\"candidates\":[\n\n", 1, KindBadResponse, http.StatusBadGateway},
		{"event with a nameless call", `data: {"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]}}]}` + "\n\n", 0, KindBadResponse, http.StatusBadGateway},
		{"empty body", "", 0, KindBadResponse, http.StatusBadGateway},
		{"comments only", ": ping\n\n: ping\n\n", 0, KindBadResponse, http.StatusBadGateway},
		{"not SSE (alt=sse missing)", `[{"candidates":[{"content":{"parts":[{"text":"hi"}]}}]}]`, 0, KindBadResponse, http.StatusBadGateway},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Gemini.NewStreamDecoder(strings.NewReader(c.body), "m")
			chunks, err := geminiDrain(t, d)
			if len(chunks) != c.wantChunks {
				t.Errorf("%d chunks before the error, want %d", len(chunks), c.wantChunks)
			}
			e := geminiAsError(t, err)
			if e.Kind != c.wantKind || e.Status != c.wantStatus {
				t.Errorf("kind %d status %d (%s), want kind %d status %d", e.Kind, e.Status, e.Message, c.wantKind, c.wantStatus)
			}
			// The error is sticky.
			if _, again := d.Next(); again != err {
				t.Errorf("second Next: %v", again)
			}
		})
	}

	// A broken connection surfaces as the reader's error.
	broken := io.MultiReader(strings.NewReader(text), iotest.ErrReader(io.ErrUnexpectedEOF))
	chunks, err := geminiDrain(t, Gemini.NewStreamDecoder(broken, "m"))
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(chunks) != 1 {
		t.Errorf("broken stream: %d chunks, %v", len(chunks), err)
	}
}

func TestGeminiStreamLargeEventsAndLineEndings(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 20000) // 320 KB
	ev := func(text, finish string) string {
		b, _ := json.Marshal(map[string]any{"candidates": []any{map[string]any{
			"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}, "finishReason": finish}}})
		return string(b)
	}
	// One big event split over two data lines, then lone-CR line endings.
	first := ev(big, "")
	cut := strings.Index(first, `"text"`)
	body := "data: " + first[:cut] + "\n" + "data: " + first[cut:] + "\n\n" +
		"data: " + ev("tail", "STOP") + "\r\r"
	for _, r := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body))} {
		chunks, err := geminiDrain(t, Gemini.NewStreamDecoder(r, "m"))
		if err != io.EOF {
			t.Fatalf("ended with %v", err)
		}
		if len(chunks) != 3 {
			t.Fatalf("%d chunks, want text, text, finish", len(chunks))
		}
		// Two data lines join with a newline, which JSON ignores between
		// tokens (the cut is before the "text" key).
		if got := *chunks[0].Choices[0].Delta.Content; got != big {
			t.Errorf("big event: %d bytes of text, want %d", len(got), len(big))
		}
		if got := *chunks[1].Choices[0].Delta.Content; got != "tail" {
			t.Errorf("second event %q", got)
		}
		if f := chunks[2].Choices[0].FinishReason; f == nil || *f != FinishStop {
			t.Errorf("finish %v", f)
		}
	}
}

// --- errors ---

func TestGeminiParseError(t *testing.T) {
	cases := []struct {
		file       string
		status     int
		wantKind   ErrorKind
		wantStatus int
		wantCode   string
		wantInMsg  string
	}{
		{"resource_exhausted.json", 429, KindRateLimited, 429, "rate_limit_exceeded", "Resource has been exhausted"},
		{"vertex_resource_exhausted.json", 429, KindRateLimited, 429, "rate_limit_exceeded", "try again later"},
		{"quota_per_minute.json", 429, KindRateLimited, 429, "rate_limit_exceeded", "exceeded your current quota"},
		{"quota_daily.json", 429, KindQuotaExhausted, 429, "insufficient_quota", "exceeded your current quota"},
		{"prepaid_credits.json", 429, KindQuotaExhausted, 429, "insufficient_quota", "credits are depleted"},
		{"context_overflow.json", 400, KindContextOverflow, 400, "context_length_exceeded", "exceeds the maximum number of tokens"},
		{"invalid_argument.json", 400, KindInvalidRequest, 400, "invalid_argument", "contents is not specified"},
		{"api_key_invalid.json", 400, KindAuth, 502, "upstream_auth_failed", "API key not valid"},
		{"unauthenticated.json", 401, KindAuth, 502, "upstream_auth_failed", "invalid authentication credentials"},
		{"permission_denied.json", 403, KindAuth, 502, "upstream_auth_failed", "denied"},
		{"not_found.json", 404, KindNotFound, 404, "model_not_found", "is not found"},
		{"internal.json", 500, KindOverloaded, 500, "internal", "internal error"},
		{"overloaded.json", 503, KindOverloaded, 503, "unavailable", "overloaded"},
		{"deadline.json", 504, KindTimeout, 504, "upstream_timeout", "Deadline expired"},
		{"bad_gateway.html", 502, KindOverloaded, 502, "upstream_error", "502 Bad Gateway"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(geminiTestdata, "errors", c.file))
			if err != nil {
				t.Fatal(err)
			}
			e := Gemini.ParseError(c.status, http.Header{"Content-Type": {"application/json"}}, body)
			if e == nil {
				t.Fatal("nil error")
			}
			if e.Kind != c.wantKind || e.Status != c.wantStatus || e.Code != c.wantCode {
				t.Errorf("kind %d status %d code %q, want kind %d status %d code %q", e.Kind, e.Status, e.Code, c.wantKind, c.wantStatus, c.wantCode)
			}
			if !strings.Contains(e.Message, c.wantInMsg) {
				t.Errorf("message %q lacks %q", e.Message, c.wantInMsg)
			}
		})
	}

	// Bodies that say little.
	for _, c := range []struct {
		status   int
		body     string
		wantKind ErrorKind
	}{
		{429, ``, KindRateLimited},
		{400, `{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}`, KindOther},
		{400, `{"error":{}}`, KindInvalidRequest},
		{400, `[]`, KindInvalidRequest},
		{413, `Request Entity Too Large`, KindInvalidRequest},
		{503, `upstream connect error or disconnect/reset before headers`, KindOverloaded},
		{504, `{"error":"timeout"}`, KindTimeout},
		{429, `{"error":{"code":429,"message":"Quota exceeded for quota metric 'Generate Content API requests per day' and limit 'GenerateContent request limit per day' of service 'generativelanguage.googleapis.com'.","status":"RESOURCE_EXHAUSTED"}}`, KindQuotaExhausted},
		{429, `{"error":{"code":429,"message":"Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 0, model: gemini-2.5-pro","status":"RESOURCE_EXHAUSTED"}}`, KindQuotaExhausted},
	} {
		e := Gemini.ParseError(c.status, nil, []byte(c.body))
		if e == nil || e.Kind != c.wantKind || e.Message == "" {
			t.Errorf("%d %q: %+v, want kind %d", c.status, c.body, e, c.wantKind)
		}
	}
	long := strings.Repeat("é", 5000)
	if e := Gemini.ParseError(500, nil, []byte(long)); len(e.Message) > 600 || !utf8.ValidString(e.Message) {
		t.Errorf("a long non-JSON body is kept whole or cut inside a character (%d bytes)", len(e.Message))
	}
	if e := Gemini.ParseError(400, nil, []byte(`{"error":{"code":400,"message":"Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio.","status":"FAILED_PRECONDITION"}}`)); e.Status != http.StatusBadGateway {
		t.Errorf("FAILED_PRECONDITION reaches the client as %d", e.Status)
	}
}

// --- embeddings ---

func TestGeminiEmbeddingsRequest(t *testing.T) {
	cases := []struct {
		name, in, out string
		target        Target
		wantURL       string
		wantInputs    int
		wantKey       string
		wantAuthz     string
	}{
		{"studio", "studio_request.in.json", "studio_request.out.json",
			Target{Credential: "AIza-test"},
			"https://generativelanguage.googleapis.com/v1beta/models/gemini-embedding-001:batchEmbedContents", 2, "AIza-test", ""},
		{"vertex", "vertex_request.in.json", "vertex_request.out.json",
			Target{Credential: "ya29.tok", Options: map[string]string{"vertex_project": "my-project", "vertex_location": "us-east1"}},
			"https://us-east1-aiplatform.googleapis.com/v1/projects/my-project/locations/us-east1/publishers/google/models/text-embedding-005:predict", 1, "", "Bearer ya29.tok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(geminiTestdata, "embed", c.in))
			if err != nil {
				t.Fatal(err)
			}
			r, n, err := GeminiEmbeddingsRequest(body, &c.target)
			if err != nil {
				t.Fatal(err)
			}
			if n != c.wantInputs {
				t.Errorf("%d inputs, want %d", n, c.wantInputs)
			}
			if r.URL.String() != c.wantURL || r.Method != http.MethodPost {
				t.Errorf("%s %s, want POST %s", r.Method, r.URL, c.wantURL)
			}
			if r.Header.Get("x-goog-api-key") != c.wantKey || r.Header.Get("Authorization") != c.wantAuthz {
				t.Errorf("auth headers %v", r.Header)
			}
			geminiGolden(t, geminiReadBody(t, r), filepath.Join(geminiTestdata, "embed", c.out))
		})
	}

	// The upstream model wins over the requested one.
	r, _, err := GeminiEmbeddingsRequest([]byte(`{"model":"alias","input":"x"}`), &Target{UpstreamModel: "models/text-embedding-004"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(r.URL.Path, "/models/text-embedding-004:batchEmbedContents") ||
		!strings.Contains(string(geminiReadBody(t, r)), `"model":"models/text-embedding-004"`) {
		t.Errorf("upstream model not used: %s", r.URL)
	}

	for _, c := range []struct{ body, param, code string }{
		{`{"model":"m","input":[1,2,3]}`, "input[0]", "invalid_request"},
		{`{"model":"m","input":[[1,2],[3]]}`, "input[0]", "invalid_request"},
		{`{"model":"m","input":["ok",7]}`, "input[1]", "invalid_request"},
		{`{"model":"m","input":[]}`, "input", "invalid_request"},
		{`{"model":"m","input":""}`, "input[0]", "invalid_request"},
		{`{"model":"m","input":["a",""]}`, "input[1]", "invalid_request"},
		{`{"model":"m"}`, "input", "invalid_request"},
		{`{"model":"m","input":null}`, "input", "invalid_request"},
		{`{"model":"m","input":{"text":"x"}}`, "input", "invalid_request"},
		{`{"model":"m","input":"x","encoding_format":"int8"}`, "encoding_format", "invalid_request"},
		{`{"model":"m","input":"x","dimensions":0}`, "dimensions", "invalid_request"},
		{`{"model":"m","input":"x","dimensions":"big"}`, "", "invalid_request"},
		{`not json`, "", "invalid_request"},
		{`{"input":"x"}`, "model", "invalid_request"},
	} {
		_, _, err := GeminiEmbeddingsRequest([]byte(c.body), &Target{})
		if err == nil {
			t.Errorf("%s accepted", c.body)
			continue
		}
		if e := geminiAsError(t, err); e.Param != c.param || e.Code != c.code || e.Status != 400 {
			t.Errorf("%s: param %q code %q status %d, want %q %q", c.body, e.Param, e.Code, e.Status, c.param, c.code)
		}
	}
}

func TestGeminiEmbeddingsResponse(t *testing.T) {
	cases := []struct {
		name, in, out string
		inputs        int
		estimate      int64
		wantTokens    int64
	}{
		// AI Studio counts nothing: the caller's estimate is used.
		{"studio", "studio_response.json", "studio_response.want.json", 2, 14, 14},
		// Vertex counts per input.
		{"vertex", "vertex_response.json", "vertex_response.want.json", 1, 99, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(geminiTestdata, "embed", c.in))
			if err != nil {
				t.Fatal(err)
			}
			out, usage, err := GeminiEmbeddingsResponse(body, "client-embedder", c.inputs, c.estimate)
			if err != nil {
				t.Fatal(err)
			}
			if usage == nil || usage.PromptTokens != c.wantTokens || usage.TotalTokens != c.wantTokens || usage.CompletionTokens != 0 {
				t.Errorf("usage %+v, want %d tokens", usage, c.wantTokens)
			}
			geminiGolden(t, out, filepath.Join(geminiTestdata, "embed", c.out))
		})
	}

	// A Vertex answer without statistics falls back to the estimate.
	_, usage, err := GeminiEmbeddingsResponse([]byte(`{"predictions":[{"embeddings":{"values":[0.5]}},{"embeddings":{"values":[0.25],"statistics":{"token_count":3}}}]}`), "m", 2, 11)
	if err != nil || usage.PromptTokens != 11 {
		t.Errorf("missing statistics: %+v, %v", usage, err)
	}

	for _, c := range []struct {
		body   string
		inputs int
	}{
		{`not json`, 1},
		{`{}`, 1},
		{`{"embeddings":null}`, 1},
		{`{"embeddings":[{"values":[0.1]}]}`, 2},
		{`{"embeddings":[{"values":[0.1]},{"values":[0.2]}]}`, 1},
		{`{"embeddings":[{"values":[]}]}`, 1},
		{`{"embeddings":[{"values":["a"]}]}`, 1},
		{`{"predictions":[]}`, 1},
		{`{"predictions":[{"embeddings":{"values":[1]}}]}`, 0},
	} {
		_, _, err := GeminiEmbeddingsResponse([]byte(c.body), "m", c.inputs, 1)
		if err == nil {
			t.Errorf("%s (%d inputs) accepted", c.body, c.inputs)
			continue
		}
		if e := geminiAsError(t, err); e.Kind != KindBadResponse {
			t.Errorf("%s: kind %d", c.body, e.Kind)
		}
	}
}

// --- fuzz ---

func geminiFuzzSeeds(f *testing.F, dir, suffix string) {
	files, _ := filepath.Glob(filepath.Join(geminiTestdata, dir, "*"+suffix))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

// FuzzGeminiRequest: any decodable canonical request encodes or is refused
// with an *Error, and an encoded body is JSON.
func FuzzGeminiRequest(f *testing.F) {
	geminiFuzzSeeds(f, "request", ".in.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		var req ChatRequest
		if json.Unmarshal(b, &req) != nil {
			return
		}
		for _, tgt := range []*Target{
			{UpstreamModel: "gemini-3-flash"},
			{UpstreamModel: "gemini-2.5-pro", Options: map[string]string{"vertex_project": "p"}},
		} {
			r, err := Gemini.NewRequest(&req, tgt, true)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("refusal %v is not an *Error", err)
				}
				continue
			}
			if body, _ := io.ReadAll(r.Body); !json.Valid(body) {
				t.Fatalf("invalid JSON body %s", body)
			}
		}
	})
}

// FuzzGeminiResponse: ParseResponse and ParseError never panic; an accepted
// answer has exactly one choice.
func FuzzGeminiResponse(f *testing.F) {
	geminiFuzzSeeds(f, "response", ".json")
	geminiFuzzSeeds(f, "errors", ".json")
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := Gemini.ParseResponse(b, "m")
		if err == nil {
			if resp == nil || len(resp.Choices) != 1 || resp.Choices[0].FinishReason == "" {
				t.Fatalf("accepted answer %+v", resp)
			}
			if _, err := json.Marshal(resp); err != nil {
				t.Fatal(err)
			}
		} else {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
		}
		for _, status := range []int{400, 429, 503} {
			if e := Gemini.ParseError(status, nil, b); e == nil || e.Status == 0 || e.Message == "" {
				t.Fatalf("ParseError(%d) = %+v", status, e)
			}
		}
		if out, _, err := GeminiEmbeddingsResponse(b, "m", 1, 1); err == nil && !json.Valid(out) {
			t.Fatalf("embeddings answer is not JSON: %s", out)
		}
	})
}

// FuzzGeminiStream: the decoder ends on any input, with io.EOF or an
// *Error, and after a clean end the last chunks are the finish (and usage).
func FuzzGeminiStream(f *testing.F) {
	geminiFuzzSeeds(f, "stream", ".sse")
	f.Add([]byte("data: {\"error\":{\"code\":429}}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := Gemini.NewStreamDecoder(bytes.NewReader(b), "m")
		var chunks []*Chunk
		for {
			c, err := d.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("stream error %v is not an *Error", err)
				}
				return
			}
			chunks = append(chunks, c)
			if len(chunks) > len(b)+3 {
				t.Fatalf("%d chunks from %d bytes", len(chunks), len(b))
			}
		}
		finishes := 0
		for _, c := range chunks {
			for _, ch := range c.Choices {
				if ch.FinishReason != nil {
					finishes++
				}
			}
		}
		if len(chunks) == 0 || finishes != 1 {
			t.Fatalf("a clean stream gave %d chunks and %d finishes", len(chunks), finishes)
		}
	})
}

// Vertex's wording for a prompt past the context window is a context
// overflow.
func TestGeminiErrorVertexInputTokenCountIsContextOverflow(t *testing.T) {
	body := []byte(`{"error":{"code":400,"message":"Unable to submit request because the input token count is 1251952 but model only supports up to 1048576. Reduce the input token count and try again. You can also use the CountTokens API to calculate prompt token count and billable characters. Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/learn/models","status":"INVALID_ARGUMENT"}}`)
	e := Gemini.ParseError(400, http.Header{}, body)
	t.Logf("kind=%d code=%q", e.Kind, e.Code)
	if e.Kind != KindContextOverflow {
		t.Errorf("Vertex overflow: kind=%d want KindContextOverflow=%d", e.Kind, KindContextOverflow)
	}
}

// The ids made up for Gemini's function calls differ from answer to answer,
// so a history replayed to Bedrock (or Anthropic) pairs each call with its
// own result.
func TestGeminiToolCallIDsDifferAcrossAnswers(t *testing.T) {
	turn := []byte(`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]},"finishReason":"STOP"}]}`)
	r1, err := Gemini.ParseResponse(turn, "m")
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := Gemini.ParseResponse(turn, "m")
	id1, id2 := r1.Choices[0].Message.ToolCalls[0].ID, r2.Choices[0].Message.ToolCalls[0].ID
	t.Logf("turn1 id=%q turn2 id=%q", id1, id2)
	if id1 == id2 {
		t.Errorf("two different turns got the same tool_call id %q", id1)
	}
	// Same for streams.
	sse := "data: " + string(turn) + "\n\n"
	d := Gemini.NewStreamDecoder(strings.NewReader(sse), "m")
	for {
		c, err := d.Next()
		if err != nil {
			break
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID == id1 || tc.ID == id2 {
					t.Errorf("a streamed answer reused the id %q of an earlier answer", tc.ID)
				}
			}
		}
	}
	// Fallback to Bedrock with that history.
	tools := []Tool{{Type: "function", Function: FunctionDecl{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}}
	msgs := []Message{
		{Role: "user", Content: TextContent("weather in Paris?")},
		r1.Choices[0].Message,
		{Role: "tool", ToolCallID: id1, Content: TextContent("sunny")},
		{Role: "assistant", Content: TextContent("Sunny.")},
		{Role: "user", Content: TextContent("and again?")},
		r2.Choices[0].Message,
		{Role: "tool", ToolCallID: id2, Content: TextContent("rain")},
	}
	br, err := bedrockEncodeRequest(&ChatRequest{Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(br.Messages)
	t.Logf("bedrock messages: %s", b)
	if strings.Count(string(b), `"toolUseId":"`+id1+`"`) != 2 || strings.Count(string(b), `"toolUseId":"`+id2+`"`) != 2 {
		t.Errorf("each tool call and its result should share one id, unique in the request: %s", b)
	}
}

// presence_penalty and frequency_penalty are dropped: Gemini 2.5 and later
// answer 400 "Penalty is not enabled".
func TestGeminiRequestDropsPenalties(t *testing.T) {
	req := &ChatRequest{Model: "gemini-2.5-flash", Messages: []Message{{Role: "user", Content: TextContent("hi")}},
		PresencePenalty: f64(0.5), FrequencyPenalty: f64(0.3)}
	out, err := geminiEncodeRequest(req, "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out.GenerationConfig)
	t.Logf("generationConfig=%s", b)
	if strings.Contains(string(b), "Penalty") {
		t.Errorf("penalties sent to gemini-2.5-flash")
	}
}

// A typeless root becomes an object, and a node of several types keeps
// properties only on its object alternative, as Gemini requires.
func TestGeminiSchemaTypesTypelessAndMultiTypeNodes(t *testing.T) {
	s, err := geminiSchema(json.RawMessage(`{"properties":{"q":{"type":"string"},"filter":{"type":["object","string"],"properties":{"k":{"type":"string"}}}},"required":["q"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	t.Logf("schema=%s", b)
	if s["type"] == nil {
		t.Errorf("root parameters schema has no type (Vertex: \"parameters schema should be of type OBJECT\")")
	}
	f := s["properties"].(map[string]any)["filter"].(map[string]any)
	if f["properties"] != nil && f["type"] == nil {
		t.Errorf("filter: properties on a node without type (Gemini: \"properties: only allowed for OBJECT type\")")
	}
}
