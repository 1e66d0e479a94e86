package routing_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/routing"
)

// scanCase is one ScanRequest table row; the bodies also seed FuzzScanRequest.
type scanCase struct {
	name string
	body string
	// want* are checked when err is nil.
	model        string
	stream       bool
	includeUsage bool
	maxTokens    int64
	modelLit     string // body[ModelSpan]; "" means absent
	optsLit      string // body[StreamOpts]; "" means absent
	// errMalformed wants routing.ErrMalformed; errOther wants another error.
	errMalformed bool
	errOther     bool
}

var scanCases = []scanCase{
	{name: "minimal", body: `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		model: "gpt-4o", modelLit: `"gpt-4o"`},
	{name: "no model", body: `{"messages":[]}`},
	{name: "empty object", body: `{}`},
	{name: "stream true", body: `{"model":"m","stream":true}`,
		model: "m", modelLit: `"m"`, stream: true},
	{name: "stream false", body: `{"model":"m","stream":false}`,
		model: "m", modelLit: `"m"`},
	{name: "stream as string", body: `{"model":"m","stream":"true"}`,
		model: "m", modelLit: `"m"`},
	{name: "stream null", body: `{"model":"m","stream":null}`,
		model: "m", modelLit: `"m"`},
	{name: "include_usage true", body: `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		model: "m", modelLit: `"m"`, stream: true, includeUsage: true, optsLit: `{"include_usage":true}`},
	{name: "include_usage false", body: `{"model":"m","stream":true,"stream_options":{"include_usage":false}}`,
		model: "m", modelLit: `"m"`, stream: true, optsLit: `{"include_usage":false}`},
	{name: "stream_options empty", body: `{"model":"m","stream":true,"stream_options":{}}`,
		model: "m", modelLit: `"m"`, stream: true, optsLit: `{}`},
	{name: "stream_options null", body: `{"model":"m","stream":true,"stream_options":null}`,
		model: "m", modelLit: `"m"`, stream: true, optsLit: `null`},
	{name: "stream_options other fields", body: `{"stream_options":{"x":[1,{"include_usage":false}],"include_usage":true},"stream":true,"model":"m"}`,
		model: "m", modelLit: `"m"`, stream: true, includeUsage: true, optsLit: `{"x":[1,{"include_usage":false}],"include_usage":true}`},
	{name: "include_usage as string", body: `{"model":"m","stream":true,"stream_options":{"include_usage":"true"}}`,
		model: "m", modelLit: `"m"`, stream: true, optsLit: `{"include_usage":"true"}`},
	{name: "include_usage nested elsewhere", body: `{"model":"m","stream":true,"metadata":{"include_usage":true}}`,
		model: "m", modelLit: `"m"`, stream: true},
	{name: "max_tokens", body: `{"model":"m","max_tokens":100}`,
		model: "m", modelLit: `"m"`, maxTokens: 100},
	{name: "max_completion_tokens", body: `{"model":"m","max_completion_tokens":4096}`,
		model: "m", modelLit: `"m"`, maxTokens: 4096},
	{name: "both token limits take the larger", body: `{"max_completion_tokens":200,"model":"m","max_tokens":100}`,
		model: "m", modelLit: `"m"`, maxTokens: 200},
	{name: "max_tokens not an integer", body: `{"model":"m","max_tokens":1.5,"max_completion_tokens":"7"}`,
		model: "m", modelLit: `"m"`},
	{name: "max_tokens negative", body: `{"model":"m","max_tokens":-5}`,
		model: "m", modelLit: `"m"`},
	{name: "max_tokens null", body: `{"model":"m","max_tokens":null}`,
		model: "m", modelLit: `"m"`},
	{name: "escaped model", body: `{"model":"gpt\u002d4o\/x"}`,
		model: "gpt-4o/x", modelLit: `"gpt\u002d4o\/x"`},
	{name: "model with escaped quote", body: `{"model":"a\"b\\c"}`,
		model: `a"b\c`, modelLit: `"a\"b\\c"`},
	{name: "model with unicode escapes", body: `{"model":"\u00e9t\u00e9 \ud83d\ude00"}`,
		model: "été 😀", modelLit: `"\u00e9t\u00e9 \ud83d\ude00"`},
	{name: "model raw UTF-8", body: `{"model":"модель-é"}`,
		model: "модель-é", modelLit: `"модель-é"`},
	{name: "model empty string", body: `{"model":""}`, modelLit: `""`},
	{name: "whitespace everywhere",
		body:  "\r\n\t {\n \"model\" \t:\r\n \"m\" ,\n\t\"stream\"  :  true ,  \"stream_options\" : { \"include_usage\" :\ttrue } ,\"max_tokens\" : 12 \n}\n\t ",
		model: "m", modelLit: `"m"`, stream: true, includeUsage: true, optsLit: "{ \"include_usage\" :\ttrue }", maxTokens: 12},
	{name: "nested model ignored", body: `{"messages":[{"role":"user","model":"evil"}],"metadata":{"model":"evil2"},"model":"good"}`,
		model: "good", modelLit: `"good"`},
	{name: "braces and quotes inside strings", body: `{"messages":[{"content":"}{\"model\":\"evil\",\"stream\":true}]"}],"model":"good"}`,
		model: "good", modelLit: `"good"`},
	// Decoders disagree on which duplicate wins, so routed members must be
	// unique.
	{name: "duplicate model refused", body: `{"model":"first","model":"second"}`, errOther: true},
	{name: "duplicate stream refused", body: `{"model":"m","stream":false,"stream":true}`, errOther: true},
	{name: "escaped duplicate model refused", body: `{"model":"cheap","mod\u0065l":"expensive"}`, errOther: true},
	{name: "deep nesting", body: `{"a":[[[[{"b":[{"c":"]}"}]}]]]],"model":"m"}`,
		model: "m", modelLit: `"m"`},
	// Not JSON objects.
	{name: "array", body: `[{"model":"m"}]`, errMalformed: true},
	{name: "string", body: `"model"`, errMalformed: true},
	{name: "number", body: `42`, errMalformed: true},
	{name: "null", body: `null`, errMalformed: true},
	{name: "true", body: `true`, errMalformed: true},
	// Not JSON.
	{name: "empty", body: ``, errMalformed: true},
	{name: "whitespace only", body: " \n", errMalformed: true},
	{name: "unterminated object", body: `{"model":"m"`, errMalformed: true},
	{name: "unterminated string", body: `{"model":"m}`, errMalformed: true},
	{name: "trailing comma", body: `{"model":"m",}`, errMalformed: true},
	{name: "trailing garbage", body: `{"model":"m"} x`, errMalformed: true},
	{name: "two objects", body: `{}{}`, errMalformed: true},
	{name: "single quotes", body: `{'model':'m'}`, errMalformed: true},
	{name: "bare key", body: `{model:"m"}`, errMalformed: true},
	{name: "bad escape", body: `{"model":"\x"}`, errMalformed: true},
	// A model that is not a string.
	{name: "model number", body: `{"model":5}`, errOther: true},
	{name: "model null", body: `{"model":null}`, errOther: true},
	{name: "model object", body: `{"model":{"name":"m"}}`, errOther: true},
	{name: "model array", body: `{"model":["m"]}`, errOther: true},
	{name: "model bool", body: `{"model":true}`, errOther: true},
}

func TestScanRequest(t *testing.T) {
	for _, tc := range scanCases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			req, err := routing.ScanRequest(body)
			switch {
			case tc.errMalformed:
				if !errors.Is(err, routing.ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				return
			case tc.errOther:
				if err == nil || errors.Is(err, routing.ErrMalformed) {
					t.Fatalf("err = %v, want a non-ErrMalformed error", err)
				}
				return
			case err != nil:
				t.Fatalf("unexpected error %v", err)
			}
			if req.Model != tc.model || req.Stream != tc.stream || req.IncludeUsage != tc.includeUsage || req.MaxTokens != tc.maxTokens {
				t.Errorf("got model=%q stream=%v include_usage=%v max_tokens=%d, want %q %v %v %d",
					req.Model, req.Stream, req.IncludeUsage, req.MaxTokens, tc.model, tc.stream, tc.includeUsage, tc.maxTokens)
			}
			if got := spanText(body, req.ModelSpan); got != tc.modelLit {
				t.Errorf("ModelSpan text = %q, want %q", got, tc.modelLit)
			}
			if got := spanText(body, req.StreamOpts); got != tc.optsLit {
				t.Errorf("StreamOpts text = %q, want %q", got, tc.optsLit)
			}
		})
	}
}

func spanText(body []byte, s routing.Span) string {
	if !s.Present() {
		return ""
	}
	return string(body[s.Start:s.End])
}

// jsonView is how a conforming JSON decoder (exact member names after
// unescaping, the last duplicate winning) reads the routed members.
type jsonView struct {
	model        string
	hasModel     bool
	stream       bool
	includeUsage bool
}

func decodeView(t testing.TB, body []byte) jsonView {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	var v jsonView
	if raw, ok := m["model"]; ok {
		v.hasModel = json.Unmarshal(raw, &v.model) == nil
	}
	v.stream = string(m["stream"]) == "true"
	var opts map[string]json.RawMessage
	if json.Unmarshal(m["stream_options"], &opts) == nil {
		v.includeUsage = string(opts["include_usage"]) == "true"
	}
	return v
}

// TestScanRequestAgreesWithJSONDecoder: ScanRequest must read model, stream
// and stream_options as the upstream's JSON decoder will, or reject the body.
// Otherwise the allow-list check and usage metering look at different
// members than the upstream acts on.
func TestScanRequestAgreesWithJSONDecoder(t *testing.T) {
	cases := []struct{ name, body string }{
		{"escaped model name", `{"model":"cheap","mod\u0065l":"expensive"}`},
		{"escaped model name only", `{"mod\u0065l":"expensive"}`},
		{"escaped stream name", `{"model":"m","str\u0065am":true}`},
		{"escaped stream_options name", `{"model":"m","stream":true,"stream_opti\u006fns":{"include_usage":true}}`},
		{"escaped include_usage name", `{"model":"m","stream":true,"stream_options":{"include_\u0075sage":true}}`},
		{"duplicate stream_options", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"stream_options":{}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			req, err := routing.ScanRequest(body)
			if err != nil {
				return // rejecting such a body is fine
			}
			v := decodeView(t, body)
			if req.Model != v.model || req.Stream != v.stream || req.IncludeUsage != v.includeUsage {
				t.Errorf("ScanRequest read model=%q stream=%v include_usage=%v; a JSON decoder reads model=%q stream=%v include_usage=%v",
					req.Model, req.Stream, req.IncludeUsage, v.model, v.stream, v.includeUsage)
			}
			out := routing.RewriteRequest(nil, body, &req, "upstream-model", true)
			ov := decodeView(t, out)
			if ov.hasModel && ov.model != "upstream-model" {
				t.Errorf("rewritten body %s: the upstream decodes model %q, want %q", out, ov.model, "upstream-model")
			}
			if ov.stream && !ov.includeUsage {
				t.Errorf("rewritten body %s: the upstream streams without include_usage", out)
			}
		})
	}
}

// rewriteCase is one RewriteRequest table row.
type rewriteCase struct {
	name     string
	body     string
	upstream string
	force    bool
	want     string
}

var rewriteCases = []rewriteCase{
	{name: "model replaced, rest byte-identical",
		body:     `{"model":"alias","messages":[{"role":"user","content":"hi \"there\" \u00e9"}],"temperature":0.50,"n":1}`,
		upstream: "gpt-4o-2024-08-06", force: true,
		want: `{"model":"gpt-4o-2024-08-06","messages":[{"role":"user","content":"hi \"there\" \u00e9"}],"temperature":0.50,"n":1}`},
	{name: "whitespace kept",
		body:     "{ \"model\" :\n \"alias\" , \"x\" : [ 1 , 2 ] }",
		upstream: "up", force: true,
		want: "{ \"model\" :\n \"up\" , \"x\" : [ 1 , 2 ] }"},
	{name: "model last",
		body:     `{"messages":[],"model":"alias"}`,
		upstream: "up", force: true,
		want: `{"messages":[],"model":"up"}`},
	{name: "include_usage inserted when absent",
		body:     `{"model":"alias","stream":true,"messages":[]}`,
		upstream: "up", force: true,
		want: `{"stream_options":{"include_usage":true},"model":"up","stream":true,"messages":[]}`},
	{name: "include_usage inserted after leading whitespace",
		body:     " \n{\"stream\":true, \"model\":\"alias\"}",
		upstream: "up", force: true,
		want: " \n{\"stream_options\":{\"include_usage\":true},\"stream\":true, \"model\":\"up\"}"},
	{name: "include_usage merged into other options (options first)",
		body:     `{"stream_options":{"x":"y"},"stream":true,"model":"alias"}`,
		upstream: "up", force: true,
		want: `{"stream_options":{"include_usage":true,"x":"y"},"stream":true,"model":"up"}`},
	{name: "include_usage merged into other options (options last)",
		body:     `{"model":"alias","stream":true,"stream_options":{"zeta":[1, 2]}}`,
		upstream: "up", force: true,
		want: `{"model":"up","stream":true,"stream_options":{"include_usage":true,"zeta":[1,2]}}`},
	{name: "include_usage false turned on",
		body:     `{"model":"alias","stream":true,"stream_options":{"include_usage":false}}`,
		upstream: "up", force: true,
		want: `{"model":"up","stream":true,"stream_options":{"include_usage":true}}`},
	{name: "stream_options null replaced",
		body:     `{"model":"alias","stream":true,"stream_options":null}`,
		upstream: "up", force: true,
		want: `{"model":"up","stream":true,"stream_options":{"include_usage":true}}`},
	{name: "stream_options not an object replaced",
		body:     `{"model":"alias","stream":true,"stream_options":[1]}`,
		upstream: "up", force: true,
		want: `{"model":"up","stream":true,"stream_options":{"include_usage":true}}`},
	{name: "include_usage already true untouched",
		body:     `{"model":"alias","stream":true,"stream_options":{ "include_usage" : true, "b":2 }}`,
		upstream: "up", force: true,
		want: `{"model":"up","stream":true,"stream_options":{ "include_usage" : true, "b":2 }}`},
	{name: "not streaming untouched",
		body:     `{"model":"alias","stream":false,"stream_options":{"include_usage":false}}`,
		upstream: "up", force: true,
		want: `{"model":"up","stream":false,"stream_options":{"include_usage":false}}`},
	{name: "no stream member untouched",
		body:     `{"model":"alias"}`,
		upstream: "up", force: true,
		want: `{"model":"up"}`},
	{name: "forceUsage false untouched",
		body:     `{"model":"alias","stream":true}`,
		upstream: "up", force: false,
		want: `{"model":"up","stream":true}`},
	{name: "no model member",
		body:     `{"stream":true}`,
		upstream: "up", force: true,
		want: `{"stream_options":{"include_usage":true},"stream":true}`},
	{name: "quote and backslash in upstream model",
		body:     `{"model":"alias"}`,
		upstream: `we"ird\name`, force: true,
		want: `{"model":"we\"ird\\name"}`},
	{name: "non-ASCII upstream model",
		body:     `{"model":"alias"}`,
		upstream: "модель-é-😀", force: true,
		want: `{"model":"модель-é-😀"}`},
	{name: "control characters in upstream model",
		body:     `{"model":"alias"}`,
		upstream: "a\nb\tc\x01", force: true,
		want: `{"model":"a\nb\tc\u0001"}`},
	{name: "HTML characters in upstream model",
		body:     `{"model":"alias"}`,
		upstream: "<a>&b", force: true,
		want: `{"model":"<a>&b"}`},
	{name: "empty upstream model",
		body:     `{"model":"alias"}`,
		upstream: "", force: true,
		want: `{"model":""}`},
	{name: "escaped alias replaced",
		body:     `{"model":"ali\u0061s"}`,
		upstream: "up", force: true,
		want: `{"model":"up"}`},
}

func TestRewriteRequest(t *testing.T) {
	for _, tc := range rewriteCases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			orig := bytes.Clone(body)
			req, err := routing.ScanRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			prefix := []byte("PREFIX")
			out := routing.RewriteRequest(bytes.Clone(prefix), body, &req, tc.upstream, tc.force)
			if !bytes.HasPrefix(out, prefix) {
				t.Fatalf("dst prefix lost: %q", out)
			}
			out = out[len(prefix):]
			if string(out) != tc.want {
				t.Errorf("got  %s\nwant %s", out, tc.want)
			}
			if !bytes.Equal(body, orig) {
				t.Errorf("input body modified: %s", body)
			}
			checkRewritten(t, body, &req, out, tc.upstream, tc.force)
		})
	}
}

// checkRewritten checks the invariants of a rewrite: valid JSON that scans
// to the new model, the same stream flag, and include_usage on when forced.
func checkRewritten(t testing.TB, body []byte, req *routing.Request, out []byte, upstream string, force bool) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("rewrite of %q is not valid JSON: %q", body, out)
	}
	got, err := routing.ScanRequest(out)
	if err != nil {
		t.Fatalf("rewrite %q does not scan: %v", out, err)
	}
	if req.ModelSpan.Present() {
		want := jsonRoundTrip(upstream)
		if got.Model != want {
			t.Errorf("rewrite %q scans to model %q, want %q", out, got.Model, want)
		}
	} else if got.Model != "" || got.ModelSpan.Present() {
		t.Errorf("rewrite %q added a model", out)
	}
	if got.Stream != req.Stream {
		t.Errorf("rewrite %q: stream = %v, want %v", out, got.Stream, req.Stream)
	}
	wantUsage := req.IncludeUsage || (force && req.Stream)
	if got.IncludeUsage != wantUsage {
		t.Errorf("rewrite %q: include_usage = %v, want %v", out, got.IncludeUsage, wantUsage)
	}
	if got.MaxTokens != req.MaxTokens {
		t.Errorf("rewrite %q: max tokens = %d, want %d", out, got.MaxTokens, req.MaxTokens)
	}
}

// jsonRoundTrip is s as a JSON decoder sees it after JSON encoding (invalid
// UTF-8 becomes U+FFFD).
func jsonRoundTrip(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

func FuzzScanRequest(f *testing.F) {
	for _, tc := range scanCases {
		f.Add([]byte(tc.body), "gpt-4o")
	}
	for _, tc := range rewriteCases {
		f.Add([]byte(tc.body), tc.upstream)
	}
	f.Add([]byte(`{"model":"m","stream":true,"stream_options":{"include_usage":false}}`), "x\"y\\z\x00\xff")
	f.Fuzz(func(t *testing.T, body []byte, upstream string) {
		req, err := routing.ScanRequest(body)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("ScanRequest accepted invalid JSON %q", body)
		}
		if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
			t.Fatalf("ScanRequest accepted a non-object %q", body)
		}
		if n := routing.CountMedia(body); n < 0 || n > len(body) {
			t.Fatalf("CountMedia = %d for %d bytes", n, len(body))
		}
		if req.ModelSpan.Present() {
			var m string
			// Invalid UTF-8 is kept by ScanRequest but replaced by decoders.
			if err := json.Unmarshal(body[req.ModelSpan.Start:req.ModelSpan.End], &m); err != nil || m != jsonRoundTrip(req.Model) {
				t.Fatalf("ModelSpan %q decodes to %q (%v), Model is %q", body[req.ModelSpan.Start:req.ModelSpan.End], m, err, req.Model)
			}
		}
		if req.StreamOpts.Present() && !json.Valid(body[req.StreamOpts.Start:req.StreamOpts.End]) {
			t.Fatalf("StreamOpts span %q is not a JSON value", body[req.StreamOpts.Start:req.StreamOpts.End])
		}
		for _, force := range []bool{false, true} {
			out := routing.RewriteRequest(nil, body, &req, upstream, force)
			checkRewritten(t, body, &req, out, upstream, force)
		}
	})
}

func TestEndpointPathAndName(t *testing.T) {
	for _, tc := range []struct {
		e          routing.Endpoint
		path, name string
	}{
		{routing.EndpointChat, "/chat/completions", "chat"},
		{routing.EndpointCompletions, "/completions", "completions"},
		{routing.EndpointEmbeddings, "/embeddings", "embeddings"},
	} {
		if tc.e.Path() != tc.path || tc.e.Name() != tc.name {
			t.Errorf("endpoint %d: Path %q Name %q, want %q %q", tc.e, tc.e.Path(), tc.e.Name(), tc.path, tc.name)
		}
		if !strings.HasPrefix(tc.e.Path(), "/") {
			t.Errorf("path %q must start with /", tc.e.Path())
		}
	}
}

func TestScanRequestChoicesAndLimit(t *testing.T) {
	for _, c := range []struct {
		body    string
		choices int64
		max     int64
		limits  [3]int64
		bad     bool
		prompts int64
	}{
		{body: `{"model":"m"}`},
		{body: `{"model":"m","n":4}`, choices: 4},
		{body: `{"model":"m","best_of":5,"n":2}`, choices: 5},
		{body: `{"model":"m","max_tokens":null}`, bad: true},
		{body: `{"model":"m","max_tokens":0}`, bad: true},
		{body: `{"model":"m","max_output_tokens":64}`, max: 64, limits: [3]int64{0, 0, 64}},
		{body: `{"model":"m","max_completion_tokens":"x"}`, bad: true},
		{body: `{"model":"m","max_tokens":7,"max_completion_tokens":9}`, max: 9, limits: [3]int64{7, 9, 0}},
		{body: `{"model":"m","MAX_TOKENS":64000}`, bad: true},
		{body: `{"model":"m","max_tokens":1,"max_tokens":2}`, max: 2, limits: [3]int64{1, 0, 0}, bad: true},
		{body: `{"model":"m","max_tokens":1e3}`, bad: true},
		{body: `{"model":"m","max_tokens":-1}`, bad: true},
		{body: `{"model":"m","prompt":"one"}`},
		{body: `{"model":"m","prompt":["a","b" , "c"]}`, prompts: 3},
		{body: `{"model":"m","prompt":[1,2,3]}`, prompts: 1},
		{body: `{"model":"m","prompt":[[1,2],[3]]}`, prompts: 2},
		{body: `{"model":"m","prompt":[]}`},
	} {
		req, err := routing.ScanRequest([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if req.Choices != c.choices || req.MaxTokens != c.max || req.Limits != c.limits || req.LimitBad != c.bad || req.Prompts != c.prompts {
			t.Errorf("%s: got choices %d, max %d, limits %v, bad %v, prompts %d", c.body, req.Choices, req.MaxTokens, req.Limits, req.LimitBad, req.Prompts)
		}
	}
}

func TestCountMedia(t *testing.T) {
	for body, want := range map[string]int{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`:                                                              0,
		`{"messages":[{"content":[{"type":"text","text":"image_url"},{"type":"image_url","image_url":{"url":"https://x"}}]}]}`:   1,
		`{"input":[{"content":[{"type":"input_image","image_url":"data:,"},{"type":"input_audio"}]}]}`:                           2,
		`{"messages":[{"content":[{"type":"image","source":{}},{"type":"image","source":{}}]}],"tools":[{"$schema":"http://"}]}`: 2,
		`{"type":"image","nested":{"type":"audio"}}`:                                                                             2,
		`{"messages":[{"content":[{"TYPE":"image_url"},{"Type":"input_audio"},{"type":{"type":"image"}}]}]}`:                     3,
		`{"messages":[{"content":[{"typ\u0065":"image_url"},{"type":"image\u005furl"}]}]}`:                                       2,
		`{"text":"say \"type\":\"image\" please"}`:                                                                               0,
	} {
		if got := routing.CountMedia([]byte(body)); got != want {
			t.Errorf("CountMedia(%s) = %d, want %d", body, got, want)
		}
	}
}

func TestRewriteRequestCapped(t *testing.T) {
	for _, c := range []struct {
		body, want string
		force      bool
	}{
		{`{"model":"a","messages":[]}`, `{"max_tokens":99,"model":"b","messages":[]}`, false},
		{` { "model":"a","stream":true}`, ` {"stream_options":{"include_usage":true},"max_tokens":99, "model":"b","stream":true}`, true},
		{`{"stream":true,"stream_options":{},"model":"a"}`, `{"max_tokens":99,"stream":true,"stream_options":{"include_usage":true},"model":"b"}`, true},
	} {
		req, err := routing.ScanRequest([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		out := routing.RewriteRequestCapped(nil, []byte(c.body), &req, "b", c.force, "max_tokens", 99)
		if string(out) != c.want {
			t.Errorf("got  %s\nwant %s", out, c.want)
		}
		got, err := routing.ScanRequest(out)
		if err != nil || !json.Valid(out) || got.MaxTokens != 99 || got.Model != "b" || got.Stream != req.Stream || (c.force && !got.IncludeUsage) {
			t.Errorf("%s: rescanned %+v, %v", out, got, err)
		}
	}
}

// BenchmarkCountMedia: the walk a budgeted request pays for its media
// allowance, on a 2 KB chat body with one image part.
func BenchmarkCountMedia(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("You are helpful. ", 100) +
		`"},{"role":"user","content":[{"type":"text","text":"What is in this image?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if routing.CountMedia(body) != 1 {
			b.Fatal("miscounted")
		}
	}
}
