package mock

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	sigV4        = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20250101/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc"
	bedrockHi    = `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`
	claudeID     = "anthropic.claude-3-5-sonnet-20240620-v1:0"
	bedrockURL   = "/model/" + claudeID + "/converse"
	bedrockTools = `,"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","description":"d","inputSchema":{"json":{"type":"object",` +
		`"properties":{"city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"}},"required":["city","days","metric"]}}}},` +
		`{"toolSpec":{"name":"second","inputSchema":{"json":{"type":"object"}}}}]}`
)

// esMessage is a decoded eventstream message.
type esMessage struct {
	headers map[string]string
	payload []byte
}

// readEventStream decodes application/vnd.amazon.eventstream messages,
// checking their lengths and both CRCs; it returns the messages and the error
// that ended the stream (nil for a clean end between messages).
func readEventStream(r io.Reader) ([]esMessage, error) {
	var out []esMessage
	for {
		var prelude [12]byte
		if _, err := io.ReadFull(r, prelude[:]); err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		total, hlen := binary.BigEndian.Uint32(prelude[0:]), binary.BigEndian.Uint32(prelude[4:])
		if crc32.ChecksumIEEE(prelude[:8]) != binary.BigEndian.Uint32(prelude[8:]) {
			return out, errors.New("prelude CRC mismatch")
		}
		if total < 16 || hlen > total-16 {
			return out, fmt.Errorf("bad lengths %d/%d", total, hlen)
		}
		rest := make([]byte, total-12)
		if _, err := io.ReadFull(r, rest); err != nil {
			return out, err
		}
		body := rest[:len(rest)-4]
		if crc32.ChecksumIEEE(append(prelude[:], body...)) != binary.BigEndian.Uint32(rest[len(rest)-4:]) {
			return out, errors.New("message CRC mismatch")
		}
		m := esMessage{headers: map[string]string{}, payload: body[hlen:]}
		for h := body[:hlen]; len(h) > 0; {
			n := int(h[0])
			if len(h) < 1+n+3 || h[1+n] != 7 {
				return out, fmt.Errorf("bad header %q", h)
			}
			name := string(h[1 : 1+n])
			vlen := int(binary.BigEndian.Uint16(h[2+n:]))
			if len(h) < 4+n+vlen {
				return out, fmt.Errorf("short header %q", h)
			}
			m.headers[name] = string(h[4+n : 4+n+vlen])
			h = h[4+n+vlen:]
		}
		out = append(out, m)
	}
}

func TestEventStreamFraming(t *testing.T) {
	// An empty-payload frame checked byte by byte against the layout.
	b, f := openFrame(nil, "x")
	b = closeFrame(b, f)
	hdrs := "\x0b:event-type\x07\x00\x01x" + "\x0d:content-type\x07\x00\x10application/json" + "\x0d:message-type\x07\x00\x05event"
	if f.headers != len(hdrs) || len(b) != 12+len(hdrs)+4 || string(b[12:12+len(hdrs)]) != hdrs ||
		binary.BigEndian.Uint32(b) != uint32(len(b)) || binary.BigEndian.Uint32(b[4:]) != uint32(len(hdrs)) {
		t.Fatalf("frame %q", b)
	}
	msgs, err := readEventStream(bytes.NewReader(append(b, b...)))
	if err != nil || len(msgs) != 2 || msgs[1].headers[":event-type"] != "x" || len(msgs[1].payload) != 0 {
		t.Fatalf("decoded %+v, %v", msgs, err)
	}
	b[len(b)-5] ^= 1 // corrupt the last header byte
	if _, err := readEventStream(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "message CRC") {
		t.Errorf("corruption not detected: %v", err)
	}
}

func bedrockWant(content, stop string, in, out, cached int) string {
	return `{"output":{"message":{"role":"assistant","content":[` + content + `]}},"stopReason":"` + stop + `","usage":` + bedrockUsage(in, out, cached, 0) + `}`
}

// bedrockUsage is the TokenUsage of a prompt of in tokens, cached of them
// read from the cache, plus written tokens written to it.
func bedrockUsage(in, out, cached, written int) string {
	u := `"inputTokens":` + strconv.Itoa(in-cached) + `,"outputTokens":` + strconv.Itoa(out) + `,"totalTokens":` + strconv.Itoa(in+written+out)
	if cached > 0 || written > 0 {
		u += `,"cacheReadInputTokens":` + strconv.Itoa(cached) + `,"cacheWriteInputTokens":` + strconv.Itoa(written)
	}
	return "{" + u + "}"
}

func TestBedrockConverse(t *testing.T) {
	s, ts := start(t, Options{ContentSize: 20})
	const hello = `{"text":"Hello from mockllm. "}`
	const toolUse = `{"toolUse":{"toolUseId":"tooluse_mock_1","name":"get_weather","input":{"city":"mock","days":1,"metric":true}}}`
	for _, tc := range []struct{ name, path, body, want string }{
		{"text", bedrockURL, bedrockHi, bedrockWant(hello, "end_turn", 1, 5, 0)},
		{"inference profile arn", "/model/arn:aws:bedrock:us-east-1:123456789012:inference-profile%2Fus.anthropic.claude-3-haiku/converse",
			bedrockHi, bedrockWant(hello, "end_turn", 1, 5, 0)},
		{"cached system prompt", bedrockURL, `{"system":[{"text":"` + strings.Repeat("s", 102) + `"},{"cachePoint":{"type":"default"}}],` +
			`"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, bedrockWant(hello, "end_turn", 26, 5, 13)},
		{"max tokens", bedrockURL, `{"inferenceConfig":{"maxTokens":1},"messages":[{"role":"user","content":[{"text":"hi"}]}]}`,
			bedrockWant(`{"text":"Hell"}`, "max_tokens", 1, 1, 0)},
		{"tool use", bedrockURL, `{"messages":[{"role":"user","content":[{"text":"hi"}]}]` + bedrockTools + `}`,
			bedrockWant(toolUse, "tool_use", 1, 13, 0)},
		{"forced tool", bedrockURL, `{"messages":[{"role":"user","content":[{"text":"hi"}]}]` +
			strings.TrimSuffix(bedrockTools, "}") + `,"toolChoice":{"tool":{"name":"second"}}}}`,
			bedrockWant(`{"toolUse":{"toolUseId":"tooluse_mock_1","name":"second","input":{}}}`, "tool_use", 1, 2, 0)},
		{"image and tool", bedrockURL, `{"messages":[{"role":"user","content":[{"text":"hi"},` +
			`{"image":{"format":"png","source":{"bytes":"AA=="}}}]}]` + bedrockTools + `}`,
			bedrockWant(`{"text":"I see 1 image(s). "},`+toolUse, "tool_use", 1, 18, 0)},
		{"tool result", bedrockURL, `{"messages":[{"role":"user","content":[{"text":"weather?"}]},` +
			`{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"get_weather","input":{}}}]},` +
			`{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"sunny, "},{"json":{"temp":22}}],"status":"success"}}]}]` +
			bedrockTools + `}`, bedrockWant(`{"text":"Tool result received: sunny, {\"temp\":22}\nHello from mockllm. "}`, "end_turn", 7, 16, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := call(t, ts, tc.path, tc.body, "Authorization", sigV4)
			if status != 200 || hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Amzn-Requestid") == "" {
				t.Fatalf("status %d, headers %v: %s", status, hdr, b)
			}
			var m struct{ Metrics map[string]int }
			if err := json.Unmarshal(b, &m); err != nil || len(m.Metrics) != 1 || m.Metrics["latencyMs"] < 0 {
				t.Errorf("metrics in %s", b)
			}
			sameJSON(t, b, tc.want, "metrics")
		})
	}
	st := s.Stats()
	if st.ByPath["/model/{modelId}/converse"] != 8 || st.ByFormat["bedrock"] != 8 || st.LastAuthorization != sigV4 || st.LastAuthHeader != "authorization" {
		t.Errorf("stats %+v", st)
	}
}

// bedrockEvents posts a ConverseStream request and decodes its events.
func bedrockEvents(t *testing.T, ts *httptest.Server, url, body string, hdr ...string) []esMessage {
	t.Helper()
	resp, err := do(t, context.Background(), ts, "POST", url, body, append([]string{"Authorization", "Bearer br-key"}, hdr...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.amazon.eventstream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	msgs, err := readEventStream(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// bedrockEvent is the union of the ConverseStream event payloads.
type bedrockEvent struct {
	P                 string `json:"p"`
	Role              string `json:"role"`
	ContentBlockIndex *int   `json:"contentBlockIndex"`
	Start             *struct {
		ToolUse struct{ ToolUseID, Name string }
	} `json:"start"`
	Delta *struct {
		Text    *string
		ToolUse *struct{ Input string }
	} `json:"delta"`
	StopReason string `json:"stopReason"`
	Usage      map[string]int
	Metrics    map[string]int
}

// decodeBedrock checks the headers of every event and returns the event
// types joined by commas and the decoded payloads.
func decodeBedrock(t *testing.T, msgs []esMessage) (string, []bedrockEvent) {
	t.Helper()
	var types []string
	evs := make([]bedrockEvent, len(msgs))
	for i, m := range msgs {
		if len(m.headers) != 3 || m.headers[":message-type"] != "event" || m.headers[":content-type"] != "application/json" {
			t.Errorf("event %d headers %v", i, m.headers)
		}
		types = append(types, m.headers[":event-type"])
		evs[i] = decode[bedrockEvent](t, m.payload)
		if evs[i].P == "" || strings.Trim(evs[i].P, pad) != "" {
			t.Errorf("event %d padding %q", i, evs[i].P)
		}
	}
	return strings.Join(types, ","), evs
}

func TestBedrockConverseStream(t *testing.T) {
	_, ts := start(t, Options{})
	url := "/model/" + claudeID + "/converse-stream"
	deltas := func(n int) string { return strings.Repeat("contentBlockDelta,", n) }
	t.Run("text", func(t *testing.T) {
		types, evs := decodeBedrock(t, bedrockEvents(t, ts, url, `{"system":[{"text":"`+strings.Repeat("s", 102)+`"}],`+
			`"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, "X-Mock-Chunks", "3"))
		if types != "messageStart,"+deltas(3)+"contentBlockStop,messageStop,metadata" {
			t.Fatalf("events %s", types)
		}
		if evs[0].Role != "assistant" {
			t.Errorf("messageStart %+v", evs[0])
		}
		var text strings.Builder
		for _, ev := range evs[1:4] {
			if *ev.ContentBlockIndex != 0 || ev.Delta == nil || ev.Delta.Text == nil {
				t.Fatalf("delta %+v", ev)
			}
			text.WriteString(*ev.Delta.Text)
		}
		if text.String() != "Hello from mockllm." || *evs[4].ContentBlockIndex != 0 || evs[5].StopReason != "end_turn" {
			t.Errorf("text %q, events %+v", text.String(), evs)
		}
		if u := evs[6].Usage; !jsonEq(u, map[string]int{"inputTokens": 13, "outputTokens": 3, "totalTokens": 29,
			"cacheReadInputTokens": 13, "cacheWriteInputTokens": 0}) || len(evs[6].Metrics) != 1 {
			t.Errorf("metadata %+v", evs[6])
		}
	})
	t.Run("max tokens", func(t *testing.T) {
		types, evs := decodeBedrock(t, bedrockEvents(t, ts, url, `{"inferenceConfig":{"maxTokens":2},"messages":[{"role":"user","content":[{"text":"hi"}]}]}`))
		if types != "messageStart,"+deltas(2)+"contentBlockStop,messageStop,metadata" || evs[4].StopReason != "max_tokens" || evs[5].Usage["outputTokens"] != 2 {
			t.Fatalf("events %s: %+v", types, evs)
		}
	})
	t.Run("tool use", func(t *testing.T) {
		types, evs := decodeBedrock(t, bedrockEvents(t, ts, url, `{"messages":[{"role":"user","content":[{"text":"hi"}]}]`+bedrockTools+`}`, "X-Mock-Chunks", "4"))
		if types != "messageStart,contentBlockStart,"+deltas(4)+"contentBlockStop,messageStop,metadata" {
			t.Fatalf("events %s", types)
		}
		if st := evs[1].Start; st == nil || st.ToolUse.ToolUseID != "tooluse_mock_1" || st.ToolUse.Name != "get_weather" || *evs[1].ContentBlockIndex != 0 {
			t.Errorf("contentBlockStart %+v", evs[1])
		}
		var input strings.Builder
		for _, ev := range evs[2:6] {
			if *ev.ContentBlockIndex != 0 || ev.Delta == nil || ev.Delta.ToolUse == nil || ev.Delta.Text != nil {
				t.Fatalf("delta %+v", ev)
			}
			input.WriteString(ev.Delta.ToolUse.Input)
		}
		if input.String() != weatherArgs || evs[7].StopReason != "tool_use" || evs[8].Usage["outputTokens"] != 13 {
			t.Errorf("input %s, events %+v", input.String(), evs)
		}
	})
	t.Run("image then tool use", func(t *testing.T) {
		types, evs := decodeBedrock(t, bedrockEvents(t, ts, url, `{"messages":[{"role":"user","content":[{"image":{"format":"jpeg","source":{"bytes":"AA=="}}},`+
			`{"image":{"format":"png","source":{"s3Location":{"uri":"s3://b/k"}}}}]}]`+bedrockTools+`}`, "X-Mock-Chunks", "1"))
		if types != "messageStart,contentBlockDelta,contentBlockStop,contentBlockStart,contentBlockDelta,contentBlockDelta,contentBlockStop,messageStop,metadata" {
			t.Fatalf("events %s", types)
		}
		if *evs[1].Delta.Text != "I see 2 image(s). " || *evs[2].ContentBlockIndex != 0 || *evs[3].ContentBlockIndex != 1 ||
			*evs[4].ContentBlockIndex != 1 || evs[4].Delta.ToolUse.Input+evs[5].Delta.ToolUse.Input != weatherArgs || *evs[6].ContentBlockIndex != 1 {
			t.Errorf("events %+v", evs)
		}
	})
}

func TestBedrockErrors(t *testing.T) {
	_, ts := start(t, Options{})
	for _, tc := range []struct {
		name, path, body string
		hdr              []string
		status           int
		typ              string
	}{
		{"missing auth", bedrockURL, bedrockHi, []string{"Authorization", ""}, 403, "MissingAuthenticationTokenException"},
		{"bad auth", bedrockURL, bedrockHi, []string{"Authorization", "Basic dTpw"}, 400, "IncompleteSignatureException"},
		{"escaped directive", "/model/" + claudeID + "%3Fstatus%3D429/converse", bedrockHi, nil, 429, "ThrottlingException"},
		{"escaped directive stream", "/model/m%3Fstatus%3D503/converse-stream", bedrockHi, nil, 503, "ServiceUnavailableException"},
		{"400", bedrockURL, bedrockHi, []string{"X-Mock-Status", "400"}, 400, "ValidationException"},
		{"403", bedrockURL, bedrockHi, []string{"X-Mock-Status", "403"}, 403, "AccessDeniedException"},
		{"404", bedrockURL, bedrockHi, []string{"X-Mock-Status", "404"}, 404, "ResourceNotFoundException"},
		{"408", bedrockURL, bedrockHi, []string{"X-Mock-Status", "408"}, 408, "ModelTimeoutException"},
		{"424", bedrockURL, bedrockHi, []string{"X-Mock-Status", "424"}, 424, "ModelErrorException"},
		{"500", bedrockURL, bedrockHi, []string{"X-Mock-Status", "500"}, 500, "InternalServerException"},
		{"502", bedrockURL, bedrockHi, []string{"X-Mock-Status", "502"}, 502, "InternalServerException"},
		{"409", bedrockURL, bedrockHi, []string{"X-Mock-Status", "409"}, 409, "ValidationException"},
		{"no messages", bedrockURL, `{"messages":[]}`, nil, 400, "ValidationException"},
		{"malformed json", bedrockURL, `{"messages":`, nil, 400, "ValidationException"},
		{"bad directive", "/model/m%3Fchunks%3D0/converse", bedrockHi, nil, 400, "ValidationException"},
		{"unknown action", "/model/m/invoke", bedrockHi, nil, 404, "ResourceNotFoundException"},
		{"wrong method", bedrockURL, "", nil, 405, "ValidationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := call(t, ts, tc.path, tc.body, append([]string{"Authorization", "Bearer k"}, tc.hdr...)...)
			var e struct{ Message string }
			if err := json.Unmarshal(b, &e); err != nil || status != tc.status || hdr.Get("X-Amzn-Errortype") != tc.typ || e.Message == "" {
				t.Fatalf("status %d, type %q: %s", status, hdr.Get("X-Amzn-Errortype"), b)
			}
			sameJSON(t, b, `{"message":`+string(mustJSON(e.Message))+`}`)
			if strings.HasPrefix(tc.name, "4") || strings.HasPrefix(tc.name, "5") || strings.HasPrefix(tc.name, "escaped") {
				if e.Message != "mockllm: injected "+statusText(tc.status) {
					t.Errorf("message %q", e.Message)
				}
			}
		})
	}
}

func TestBedrockFaults(t *testing.T) {
	url := "/model/" + claudeID + "/converse-stream"
	t.Run("latency", func(t *testing.T) {
		_, ts := start(t, Options{})
		_, evs := decodeBedrock(t, bedrockEvents(t, ts, "/model/m%3Flatency%3D30ms/converse-stream", bedrockHi))
		if ms := evs[len(evs)-1].Metrics["latencyMs"]; ms < 30 {
			t.Errorf("latencyMs %d", ms)
		}
	})
	t.Run("interval", func(t *testing.T) {
		_, ts := start(t, Options{})
		begin := time.Now()
		types, _ := decodeBedrock(t, bedrockEvents(t, ts, url, bedrockHi, "X-Mock-Chunks", "3", "X-Mock-Interval", "15ms"))
		if strings.Count(types, "contentBlockDelta") != 3 || time.Since(begin) < 30*time.Millisecond {
			t.Errorf("events %s after %v", types, time.Since(begin))
		}
	})
	t.Run("reset mid-stream", func(t *testing.T) {
		s, ts := start(t, Options{})
		resp, err := do(t, context.Background(), ts, "POST", url, bedrockHi, "Authorization", "Bearer k", "X-Mock-Fault", "reset-mid-stream", "X-Mock-Chunks", "4")
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := readEventStream(resp.Body)
		resp.Body.Close()
		// messageStart and 2 of the 4 deltas
		if err == nil || len(msgs) != 3 || msgs[2].headers[":event-type"] != "contentBlockDelta" {
			t.Errorf("%d messages before the reset, error %v", len(msgs), err)
		}
		if st := s.Stats(); st.Resets != 1 || st.Completed != 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("reset", func(t *testing.T) {
		s, ts := start(t, Options{})
		resp, err := do(t, context.Background(), ts, "POST", "/model/m%3Ffault%3Dreset/converse", bedrockHi, "Authorization", "Bearer k")
		if err == nil {
			resp.Body.Close()
			t.Fatal("want a client error from the reset")
		}
		if st := s.Stats(); st.Resets != 1 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("hang", func(t *testing.T) {
		s, ts := start(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			resp, err := do(t, ctx, ts, "POST", url, bedrockHi, "Authorization", "Bearer k", "X-Mock-Fault", "hang")
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
}
