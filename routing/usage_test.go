package routing_test

import (
	"testing"

	"github.com/tollgate/tollgate/routing"
)

var usageBodyCases = []struct {
	name string
	body string
	want routing.Usage
}{
	{"chat",
		`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
		routing.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, Present: true}},
	{"completions",
		`{"id":"cmpl-1","object":"text_completion","choices":[{"text":"x","index":0,"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":16,"total_tokens":19}}`,
		routing.Usage{PromptTokens: 3, CompletionTokens: 16, TotalTokens: 19, Present: true}},
	{"embeddings",
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`,
		routing.Usage{PromptTokens: 8, TotalTokens: 8, Present: true}},
	{"cached tokens",
		`{"choices":[],"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"cached_tokens":7}}}`,
		routing.Usage{PromptTokens: 2006, CompletionTokens: 300, TotalTokens: 2306, CachedTokens: 1920, Present: true}},
	{"prompt_tokens_details null",
		`{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_tokens_details":null}}`,
		routing.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2, Present: true}},
	{"responses API names",
		`{"object":"response","usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":4},"output_tokens":3,"total_tokens":12}}`,
		routing.Usage{PromptTokens: 9, CompletionTokens: 3, TotalTokens: 12, CachedTokens: 4, Present: true}},
	{"total missing is summed",
		`{"usage":{"prompt_tokens":4,"completion_tokens":6}}`,
		routing.Usage{PromptTokens: 4, CompletionTokens: 6, TotalTokens: 10, Present: true}},
	{"empty usage object",
		`{"usage":{}}`,
		routing.Usage{Present: true}},
	{"non-integer counts",
		`{"usage":{"prompt_tokens":"4","completion_tokens":1.5,"total_tokens":null}}`,
		routing.Usage{Present: true}},
	{"pretty printed",
		"{\n  \"usage\" : {\n    \"prompt_tokens\" : 7 ,\n    \"completion_tokens\" : 2 ,\n    \"total_tokens\" : 9\n  }\n}\n",
		routing.Usage{PromptTokens: 7, CompletionTokens: 2, TotalTokens: 9, Present: true}},
	{"usage first",
		`{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3},"choices":[{"message":{"content":"\"usage\": {}"}}]}`,
		routing.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, Present: true}},
	{"usage null", `{"id":"x","usage":null}`, routing.Usage{}},
	{"usage absent", `{"id":"x","choices":[]}`, routing.Usage{}},
	{"usage only nested", `{"choices":[{"usage":{"prompt_tokens":1}}],"meta":{"usage":{"prompt_tokens":2}}}`, routing.Usage{}},
	{"usage as a string", `{"usage":"lots"}`, routing.Usage{}},
	{"array body", `[{"usage":{"prompt_tokens":1}}]`, routing.Usage{}},
	{"error body", `{"error":{"message":"usage limit","type":"requests"}}`, routing.Usage{}},
	{"empty body", ``, routing.Usage{}},
	{"html", `<html>"usage"</html>`, routing.Usage{}},
}

func TestUsageFromBody(t *testing.T) {
	for _, tc := range usageBodyCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := routing.UsageFromBody([]byte(tc.body)); got != tc.want {
				t.Errorf("UsageFromBody = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestUsageFromBodyAllocs(t *testing.T) {
	body := []byte(usageBodyCases[3].body)
	if n := testing.AllocsPerRun(100, func() { routing.UsageFromBody(body) }); n != 0 {
		t.Errorf("UsageFromBody allocates %v times per call, documented as zero", n)
	}
}

var chunkCases = []struct {
	name      string
	data      string
	want      routing.Usage
	usageOnly bool
}{
	{"delta chunk",
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`,
		routing.Usage{}, false},
	{"responses completed event",
		`{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","output":[],` +
			`"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":4},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":17}}}`,
		routing.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17, CachedTokens: 4, Present: true}, false},
	{"responses created event",
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}`,
		routing.Usage{}, false},
	{"delta chunk with usage null",
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}`,
		routing.Usage{}, false},
	{"usage-only chunk",
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`,
		routing.Usage{PromptTokens: 9, CompletionTokens: 12, TotalTokens: 21, Present: true}, true},
	{"usage-only chunk, spaced empty choices",
		`{ "choices" : [ ] , "usage" : { "prompt_tokens" : 1 , "completion_tokens" : 2 } }`,
		routing.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, Present: true}, true},
	{"usage-only chunk with cached tokens",
		`{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101,"prompt_tokens_details":{"cached_tokens":64}}}`,
		routing.Usage{PromptTokens: 100, CompletionTokens: 1, TotalTokens: 101, CachedTokens: 64, Present: true}, true},
	{"choices and usage",
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
		routing.Usage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12, Present: true}, false},
	{"usage without choices member",
		`{"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
		routing.Usage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12, Present: true}, false},
	{"completions usage-only chunk",
		`{"id":"cmpl","object":"text_completion","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`,
		routing.Usage{PromptTokens: 2, CompletionTokens: 3, TotalTokens: 5, Present: true}, true},
	{"empty choices, usage null",
		`{"choices":[],"usage":null}`,
		routing.Usage{}, false},
	{"usage text in content",
		`{"choices":[{"delta":{"content":"the \"usage\" member"}}]}`,
		routing.Usage{}, false},
	{"done", `[DONE]`, routing.Usage{}, false},
	{"empty", ``, routing.Usage{}, false},
	{"not JSON", `"usage" is not JSON`, routing.Usage{}, false},
}

func TestChunkUsage(t *testing.T) {
	for _, tc := range chunkCases {
		t.Run(tc.name, func(t *testing.T) {
			u, only := routing.ChunkUsage([]byte(tc.data))
			if u != tc.want || only != tc.usageOnly {
				t.Errorf("ChunkUsage = %+v, %v; want %+v, %v", u, only, tc.want, tc.usageOnly)
			}
		})
	}
}

func TestChunkUsageNoUsageAllocs(t *testing.T) {
	data := []byte(chunkCases[0].data)
	if n := testing.AllocsPerRun(100, func() { routing.ChunkUsage(data) }); n != 0 {
		t.Errorf("ChunkUsage allocates %v times for a chunk without usage", n)
	}
}

// malformedUsageInputs are bodies and chunks an upstream may send (truncated
// or odd but sometimes valid JSON) that contain "usage".
var malformedUsageInputs = []string{
	`{"usage":{},"`, // truncated after a member's opening quote
	`{"usage":1,"`,  // same
	`{"id":"x","usage":{"prompt_tokens":1},"`,
	`{"usage":{"prompt_tokens":1,"`, // truncated inside usage
	`{"usage":{"prompt_tokens":`,    // truncated value
	`{"usage":{},"choices":`,        // truncated before a value
	`{"usage":{},"choices":[`,       // truncated array
	`{"choices":0,"usage":{}}`,      // valid JSON: choices is a one-byte number
	`{"choices":1,"usage":{"prompt_tokens":3}}`,
	`{"usage":{"prompt_tokens_details":{"`,
	`{"usage"`,
	`{"usage":`,
	`{"usage":}`,
	`{"usage":{}`,
	`{"usage":{}}}`,
	`{,"usage":{}}`,
	`{"usage":{"prompt_tokens_details":`,
}

// TestUsageMalformedInputDoesNotPanic: usage extraction reads untrusted
// upstream bytes and must not panic on them.
func TestUsageMalformedInputDoesNotPanic(t *testing.T) {
	for _, in := range malformedUsageInputs {
		for _, fn := range []struct {
			name string
			call func([]byte)
		}{
			{"UsageFromBody", func(b []byte) { routing.UsageFromBody(b) }},
			{"ChunkUsage", func(b []byte) { routing.ChunkUsage(b) }},
		} {
			if p := panicOf(func() { fn.call([]byte(in)) }); p != nil {
				t.Errorf("%s(%q) panics: %v", fn.name, in, p)
			}
		}
	}
}

func panicOf(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

func FuzzChunkUsage(f *testing.F) {
	for _, tc := range chunkCases {
		f.Add([]byte(tc.data))
	}
	for _, tc := range usageBodyCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		u, only := routing.ChunkUsage(data)
		if only && !u.Present {
			t.Errorf("usage-only chunk without usage: %q", data)
		}
		if !u.Present && u != (routing.Usage{}) {
			t.Errorf("usage %+v not marked present for %q", u, data)
		}
		b := routing.UsageFromBody(data)
		if !b.Present && b != (routing.Usage{}) {
			t.Errorf("body usage %+v not marked present for %q", b, data)
		}
	})
}
