package mock

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	geminiPath = "/v1beta/models/gemini-2.0-flash:generateContent"
	vertexPath = "/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.0-flash:"
	geminiHi   = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	geminiTool = `"tools":[{"functionDeclarations":[{"name":"get_weather","description":"d","parameters":{"type":"OBJECT",` +
		`"properties":{"city":{"type":"STRING"},"days":{"type":"INTEGER"},"metric":{"type":"BOOLEAN"}},"required":["city","days","metric"]}},` +
		`{"name":"second","parametersJsonSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}]}]`
)

// geminiWant builds the expected GenerateContentResponse (responseId dropped).
func geminiWant(parts, finish string, prompt, output, cached int, model string) string {
	u := `"promptTokenCount":` + strconv.Itoa(prompt) + `,"candidatesTokenCount":` + strconv.Itoa(output) +
		`,"totalTokenCount":` + strconv.Itoa(prompt+output)
	if cached > 0 {
		u += `,"cachedContentTokenCount":` + strconv.Itoa(cached)
	}
	return `{"candidates":[{"content":{"parts":[` + parts + `],"role":"model"},"finishReason":"` + finish + `","index":0}],` +
		`"usageMetadata":{` + u + `},"modelVersion":"` + model + `"}`
}

func TestGeminiGenerate(t *testing.T) {
	s, ts := start(t, Options{ContentSize: 20})
	const hello = `{"text":"Hello from mockllm. "}`
	for _, tc := range []struct{ name, path, body, want string }{
		{"text", geminiPath, geminiHi, geminiWant(hello, "STOP", 1, 5, 0, "gemini-2.0-flash")},
		{"v1", "/v1/models/gemini-2.0-flash:generateContent", geminiHi, geminiWant(hello, "STOP", 1, 5, 0, "gemini-2.0-flash")},
		{"vertex", vertexPath + "generateContent", geminiHi, geminiWant(hello, "STOP", 1, 5, 0, "gemini-2.0-flash")},
		{"vertex v1beta1", "/v1beta1/projects/p/locations/l/publishers/google/models/gemini-2.0-flash:generateContent", geminiHi,
			geminiWant(hello, "STOP", 1, 5, 0, "gemini-2.0-flash")},
		{"cached system instruction", geminiPath, `{"systemInstruction":{"parts":[{"text":"` + strings.Repeat("s", 102) + `"}]},` +
			`"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, geminiWant(hello, "STOP", 26, 5, 13, "gemini-2.0-flash")},
		{"snake case system instruction", geminiPath, `{"system_instruction":{"parts":[{"text":"` + strings.Repeat("s", 102) + `"}]},` +
			`"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, geminiWant(hello, "STOP", 26, 5, 13, "gemini-2.0-flash")},
		{"max output tokens", geminiPath, `{"generationConfig":{"maxOutputTokens":3},"contents":[{"parts":[{"text":"hi"}]}]}`,
			geminiWant(`{"text":"Hello from m"}`, "MAX_TOKENS", 1, 3, 0, "gemini-2.0-flash")},
		{"function call", geminiPath, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],` + geminiTool + `}`,
			geminiWant(`{"functionCall":{"name":"get_weather","args":{"city":"mock","days":1,"metric":true}}}`, "STOP", 1, 13, 0, "gemini-2.0-flash")},
		{"forced function", geminiPath, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],` + geminiTool +
			`,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["second"]}}}`,
			geminiWant(`{"functionCall":{"name":"second","args":{"q":"mock"}}}`, "STOP", 1, 5, 0, "gemini-2.0-flash")},
		{"functions off", geminiPath, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],` + geminiTool +
			`,"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`, geminiWant(hello, "STOP", 1, 5, 0, "gemini-2.0-flash")},
		{"images and function call", vertexPath + "generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"},` +
			`{"inlineData":{"mimeType":"image/png","data":"AA=="}},{"fileData":{"mimeType":"image/jpeg","fileUri":"gs://b/x.jpg"}},` +
			`{"inline_data":{"mime_type":"image/webp","data":"AA=="}},{"inlineData":{"mimeType":"application/pdf","data":"AA=="}}]}],` + geminiTool + `}`,
			geminiWant(`{"text":"I see 3 image(s). "},{"functionCall":{"name":"get_weather","args":{"city":"mock","days":1,"metric":true}}}`,
				"STOP", 1, 18, 0, "gemini-2.0-flash")},
		{"function response", geminiPath, `{"contents":[{"role":"user","parts":[{"text":"weather?"}]},` +
			`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{}}}]},` +
			`{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"result":"sunny, 22C"}}}]}],` + geminiTool + `}`,
			geminiWant(`{"text":"Tool result received: sunny, 22C\nHello from mockllm. "}`, "STOP", 5, 14, 0, "gemini-2.0-flash")},
		{"structured function response", geminiPath, `{"contents":[{"role":"function","parts":[{"function_response":{"name":"f",` +
			`"response":{"temp": 22, "sky": "clear"}}}]}]}`,
			geminiWant(`{"text":"Tool result received: {\"temp\":22,\"sky\":\"clear\"}\nHello from mockllm. "}`, "STOP", 7, 17, 0, "gemini-2.0-flash")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := call(t, ts, tc.path, tc.body, "X-Goog-Api-Key", "AIza-test")
			if status != 200 || hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d: %s", status, b)
			}
			if id := decode[struct{ ResponseID string }](t, b).ResponseID; !strings.HasPrefix(id, "mock-") {
				t.Errorf("responseId %q", id)
			}
			sameJSON(t, b, tc.want, "responseId")
		})
	}
	st := s.Stats()
	if st.ByPath["/v1beta/models/{model}:generateContent"] != 9 || st.ByPath["/v1/models/{model}:generateContent"] != 1 ||
		st.ByPath["/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent"] != 2 ||
		st.ByPath["/v1beta1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent"] != 1 ||
		st.ByFormat["gemini"] != 10 || st.ByFormat["vertex"] != 3 || st.LastAuthorization != "AIza-test" || st.LastAuthHeader != "x-goog-api-key" {
		t.Errorf("stats %+v", st)
	}
}

func TestGeminiAuth(t *testing.T) {
	s, ts := start(t, Options{})
	for _, tc := range []struct {
		name, path         string
		hdr                []string
		status             int
		auth, source, code string
	}{
		{"key query", geminiPath + "?key=AIza-q", nil, 200, "AIza-q", "key", ""},
		{"header beats query", geminiPath + "?key=AIza-q", []string{"X-Goog-Api-Key", "AIza-h"}, 200, "AIza-h", "x-goog-api-key", ""},
		{"bearer", geminiPath, []string{"Authorization", "Bearer ya29.tok"}, 200, "Bearer ya29.tok", "authorization", ""},
		{"vertex bearer", vertexPath + "generateContent", []string{"Authorization", "Bearer ya29.tok"}, 200, "Bearer ya29.tok", "authorization", ""},
		{"missing", geminiPath, nil, 403, "", "", "PERMISSION_DENIED"},
		{"vertex missing", vertexPath + "generateContent", nil, 401, "", "", "UNAUTHENTICATED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, tc.path, geminiHi, tc.hdr...)
			if status != tc.status {
				t.Fatalf("status %d: %s", status, b)
			}
			if tc.code != "" {
				if e := decode[googleErr](t, b); e.Error.Status != tc.code || e.Error.Code != tc.status {
					t.Errorf("error %s", b)
				}
			}
			if st := s.Stats(); st.LastAuthorization != tc.auth || st.LastAuthHeader != tc.source {
				t.Errorf("recorded %q from %q", st.LastAuthorization, st.LastAuthHeader)
			}
		})
	}
}

// geminiChunk is the part of a streamed GenerateContentResponse the tests read.
type geminiChunk struct {
	Candidates []struct {
		Content struct {
			Role  string
			Parts []struct {
				Text         *string
				FunctionCall *struct {
					Name string
					Args map[string]any
				}
			}
		}
		FinishReason string
	}
	UsageMetadata map[string]int
	ModelVersion  string
	ResponseID    string
}

func TestGeminiStream(t *testing.T) {
	_, ts := start(t, Options{})
	for _, tc := range []struct {
		name, path, body, text, finish string
		hdr                            []string
		n, output                      int
		sse, tool                      bool
	}{
		{"sse", "/v1beta/models/gem:streamGenerateContent?alt=sse", geminiHi, "Hello from mockllm. This", "STOP", nil, 4, 4, true, false},
		{"json array", "/v1beta/models/gem:streamGenerateContent", geminiHi, "Hello from mockllm. This", "STOP", nil, 4, 4, false, false},
		{"vertex sse", "/v1/projects/proj/locations/us-central1/publishers/google/models/gem:streamGenerateContent?alt=sse", geminiHi, "Hello from mockllm. This", "STOP", nil, 4, 4, true, false},
		{"max output tokens", "/v1beta/models/gem:streamGenerateContent?alt=sse",
			`{"generationConfig":{"maxOutputTokens":2},"contents":[{"parts":[{"text":"hi"}]}]}`, "Hello from", "MAX_TOKENS", nil, 2, 2, true, false},
		{"function call", "/v1beta/models/gem:streamGenerateContent?alt=sse",
			`{"contents":[{"parts":[{"text":"hi"},{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}],` + geminiTool + `}`,
			"I see 1 image(s). ", "STOP", nil, 1, 18, true, true},
		{"chunks header", "/v1beta/models/gem:streamGenerateContent?alt=sse", geminiHi, "Hello from", "STOP", []string{"X-Mock-Chunks", "2"}, 2, 2, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := call(t, ts, tc.path+map[bool]string{true: "&", false: "?"}[strings.Contains(tc.path, "?")]+"key=k&chunks=ignored",
				tc.body, append([]string{"X-Mock-Chunks", "4"}, tc.hdr...)...)
			ct := map[bool]string{true: "text/event-stream", false: "application/json"}[tc.sse]
			if status != 200 || hdr.Get("Content-Type") != ct {
				t.Fatalf("status %d, content type %q: %s", status, hdr.Get("Content-Type"), b)
			}
			var raw []json.RawMessage
			if tc.sse {
				body := string(b)
				if !strings.HasSuffix(body, "\r\n\r\n") {
					t.Fatalf("SSE stream does not end in CRLF CRLF: %q", body)
				}
				for _, ev := range strings.Split(strings.TrimSuffix(body, "\r\n\r\n"), "\r\n\r\n") {
					data, ok := strings.CutPrefix(ev, "data: ")
					if !ok {
						t.Fatalf("event %q", ev)
					}
					raw = append(raw, json.RawMessage(data))
				}
			} else if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatalf("JSON array stream: %v: %s", err, b)
			}
			if len(raw) != tc.n {
				t.Fatalf("%d events, want %d: %s", len(raw), tc.n, b)
			}
			var text strings.Builder
			id := ""
			for i, r := range raw {
				c := decode[geminiChunk](t, r)
				last := i == len(raw)-1
				if len(c.Candidates) != 1 || c.Candidates[0].Content.Role != "model" || c.ModelVersion != "gem" ||
					(id != "" && c.ResponseID != id) || (c.Candidates[0].FinishReason != "") != last {
					t.Errorf("event %d: %s", i, r)
				}
				id = c.ResponseID
				for _, p := range c.Candidates[0].Content.Parts {
					if p.Text != nil {
						text.WriteString(*p.Text)
					}
				}
				want := map[string]int{"promptTokenCount": 1, "totalTokenCount": 1}
				if last {
					want = map[string]int{"promptTokenCount": 1, "candidatesTokenCount": tc.output, "totalTokenCount": 1 + tc.output}
					if c.Candidates[0].FinishReason != tc.finish {
						t.Errorf("finishReason %q", c.Candidates[0].FinishReason)
					}
					parts := c.Candidates[0].Content.Parts
					if fc := parts[len(parts)-1].FunctionCall; tc.tool != (fc != nil) || tc.tool &&
						(fc.Name != "get_weather" || !jsonEq(fc.Args, map[string]any{"city": "mock", "days": 1, "metric": true})) {
						t.Errorf("function call in %s", r)
					}
				}
				if !jsonEq(c.UsageMetadata, want) {
					t.Errorf("event %d usage %v, want %v", i, c.UsageMetadata, want)
				}
			}
			if text.String() != tc.text {
				t.Errorf("text %q, want %q", text.String(), tc.text)
			}
		})
	}
}

func TestGeminiEmbeddings(t *testing.T) {
	_, ts := start(t, Options{EmbeddingDims: 4})
	_, _, ob := call(t, ts, "/v1/embeddings", `{"model":"e","input":["hello world","bye"]}`)
	oai := decode[struct {
		Data []struct{ Embedding []float32 }
	}](t, ob)
	type values struct{ Values []float32 }

	status, _, b := call(t, ts, "/v1beta/models/text-embedding-004:embedContent?key=k",
		`{"content":{"parts":[{"text":"hello "},{"text":"world"}]}}`)
	one := decode[struct{ Embedding values }](t, b)
	if status != 200 || !jsonEq(one.Embedding.Values, oai.Data[0].Embedding) {
		t.Errorf("embedContent %d: %s, want the OpenAI vector %v", status, b, oai.Data[0].Embedding)
	}

	status, _, b = call(t, ts, "/v1beta/models/text-embedding-004:batchEmbedContents?key=k",
		`{"requests":[{"model":"models/text-embedding-004","content":{"parts":[{"text":"hello world"}]}},`+
			`{"model":"models/text-embedding-004","content":{"parts":[{"text":"bye"}]},"outputDimensionality":3}]}`)
	batch := decode[struct{ Embeddings []values }](t, b)
	if status != 200 || len(batch.Embeddings) != 2 || !jsonEq(batch.Embeddings[0].Values, oai.Data[0].Embedding) || len(batch.Embeddings[1].Values) != 3 {
		t.Errorf("batchEmbedContents %d: %s", status, b)
	}

	status, _, b = call(t, ts, vertexPath+"predict", `{"instances":[{"content":"hello world"},{"content":"bye"}],"parameters":{"outputDimensionality":2}}`,
		"Authorization", "Bearer t")
	var pred struct {
		Predictions []struct {
			Embeddings struct {
				Statistics struct {
					Truncated  bool `json:"truncated"`
					TokenCount int  `json:"token_count"`
				}
				Values []float32
			}
		}
		Metadata struct{ BillableCharacterCount int }
	}
	if err := json.Unmarshal(b, &pred); err != nil || status != 200 || len(pred.Predictions) != 2 || pred.Metadata.BillableCharacterCount != 14 {
		t.Fatalf("predict %d: %s", status, b)
	}
	for i, p := range pred.Predictions {
		if len(p.Embeddings.Values) != 2 || p.Embeddings.Statistics.TokenCount != []int{3, 1}[i] || p.Embeddings.Statistics.Truncated {
			t.Errorf("prediction %d: %+v", i, p)
		}
	}
}

type googleErr struct {
	Error struct {
		Code    int
		Message string
		Status  string
		Details []map[string]any
	}
}

func TestGeminiErrors(t *testing.T) {
	_, ts := start(t, Options{})
	for _, tc := range []struct {
		name, path, body string
		hdr              []string
		status           int
		code             string
	}{
		{"escaped directive", "/v1beta/models/gem%3Fstatus%3D500:generateContent", geminiHi, nil, 500, "INTERNAL"},
		{"escaped directives on vertex", "/v1/projects/p/locations/l/publishers/google/models/gem%3Flatency%3D1ms%26status%3D503:generateContent",
			geminiHi, nil, 503, "UNAVAILABLE"},
		{"header directive", geminiPath, geminiHi, []string{"X-Mock-Status", "429"}, 429, "RESOURCE_EXHAUSTED"},
		{"400", "/v1beta/models/gem%3Fstatus%3D400:streamGenerateContent", geminiHi, nil, 400, "INVALID_ARGUMENT"},
		{"403", geminiPath, geminiHi, []string{"X-Mock-Status", "403"}, 403, "PERMISSION_DENIED"},
		{"404", geminiPath, geminiHi, []string{"X-Mock-Status", "404"}, 404, "NOT_FOUND"},
		{"409", geminiPath, geminiHi, []string{"X-Mock-Status", "409"}, 409, "ABORTED"},
		{"418", geminiPath, geminiHi, []string{"X-Mock-Status", "418"}, 418, "INVALID_ARGUMENT"},
		{"502", geminiPath, geminiHi, []string{"X-Mock-Status", "502"}, 502, "INTERNAL"},
		{"504", geminiPath, geminiHi, []string{"X-Mock-Status", "504"}, 504, "DEADLINE_EXCEEDED"},
		{"embeddings", "/v1beta/models/e%3Fstatus%3D503:batchEmbedContents", `{"requests":[{"content":{"parts":[{"text":"x"}]}}]}`, nil, 503, "UNAVAILABLE"},
		{"bad directive", "/v1beta/models/gem%3Fcolour%3Dred:generateContent", geminiHi, nil, 400, "INVALID_ARGUMENT"},
		{"malformed json", geminiPath, `{"contents":`, nil, 400, "INVALID_ARGUMENT"},
		{"no contents", geminiPath, `{}`, nil, 400, "INVALID_ARGUMENT"},
		{"no embed content", "/v1beta/models/e:embedContent", `{}`, nil, 400, "INVALID_ARGUMENT"},
		{"no requests", "/v1beta/models/e:batchEmbedContents", `{"requests":[]}`, nil, 400, "INVALID_ARGUMENT"},
		{"no instances", vertexPath + "predict", `{}`, nil, 400, "INVALID_ARGUMENT"},
		{"unknown method", "/v1beta/models/gem:countTokens", geminiHi, nil, 404, "NOT_FOUND"},
		{"no method", "/v1beta/models/gem", geminiHi, nil, 404, "NOT_FOUND"},
		{"unknown vertex publisher", "/v1/projects/p/locations/l/publishers/meta/models/x:generateContent", geminiHi, nil, 404, "NOT_FOUND"},
		{"wrong method", geminiPath, "", nil, 405, "INVALID_ARGUMENT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := call(t, ts, tc.path, tc.body, append([]string{"X-Goog-Api-Key", "k"}, tc.hdr...)...)
			e := decode[googleErr](t, b)
			if status != tc.status || e.Error.Code != tc.status || e.Error.Status != tc.code || e.Error.Message == "" {
				t.Fatalf("status %d: %s", status, b)
			}
			if status == 429 {
				sameJSON(t, b, `{"error":{"code":429,"message":"mockllm: injected Too Many Requests","status":"RESOURCE_EXHAUSTED",`+
					`"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}]}}`)
			} else {
				sameJSON(t, b, `{"error":{"code":`+strconv.Itoa(status)+`,"message":`+string(mustJSON(e.Error.Message))+`,"status":"`+tc.code+`"}}`)
			}
			if hdr.Get("Retry-After") != "" {
				t.Errorf("Retry-After %q", hdr.Get("Retry-After"))
			}
		})
	}
}

func TestGeminiFaults(t *testing.T) {
	hdr := []string{"X-Goog-Api-Key", "k"}
	t.Run("latency and interval", func(t *testing.T) {
		_, ts := start(t, Options{})
		begin := time.Now()
		status, _, b := call(t, ts, "/v1beta/models/gem%3Flatency%3D20ms%26interval%3D10ms%26chunks%3D3:streamGenerateContent?alt=sse", geminiHi, hdr...)
		if status != 200 || strings.Count(string(b), "data: ") != 3 || time.Since(begin) < 40*time.Millisecond {
			t.Errorf("status %d after %v: %s", status, time.Since(begin), b)
		}
	})
	t.Run("reset mid-stream", func(t *testing.T) {
		s, ts := start(t, Options{})
		resp, err := do(t, context.Background(), ts, "POST", "/v1beta/models/gem:streamGenerateContent?alt=sse", geminiHi,
			append(hdr, "X-Mock-Fault", "reset-mid-stream", "X-Mock-Chunks", "6")...)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || strings.Count(string(b), "data: ") != 3 {
			t.Errorf("error %v after %q", err, b)
		}
		if st := s.Stats(); st.Resets != 1 || st.Completed != 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("reset mid-body", func(t *testing.T) {
		s, ts := start(t, Options{})
		resp, err := do(t, context.Background(), ts, "POST", "/v1beta/models/gem%3Ffault%3Dreset-mid-stream:generateContent", geminiHi, hdr...)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil || s.Stats().Resets != 1 {
			t.Errorf("error %v, stats %+v", err, s.Stats())
		}
	})
	t.Run("hang", func(t *testing.T) {
		s, ts := start(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			resp, err := do(t, ctx, ts, "POST", vertexPath+"generateContent", geminiHi, "Authorization", "Bearer t", "X-Mock-Fault", "hang")
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		eventually(t, "request in flight", func() bool { return s.Stats().InFlight == 1 })
		cancel()
		if err := <-errc; err == nil {
			t.Error("want a client error after cancel")
		}
		eventually(t, "Cancelled == 1", func() bool { return s.Stats().Cancelled == 1 })
	})
	t.Run("unescaped directive is not one", func(t *testing.T) {
		// Without escaping, "?status=500:generateContent" is the URL's query.
		_, ts := start(t, Options{})
		req, _ := http.NewRequest("POST", ts.URL+"/v1beta/models/gem?status=500:generateContent", strings.NewReader(geminiHi))
		req.Header.Set("X-Goog-Api-Key", "k")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
}
