package mock

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Amazon Bedrock's Converse API: POST /model/{modelId}/converse and
// /model/{modelId}/converse-stream (docs.aws.amazon.com/bedrock/latest/
// APIReference/API_runtime_Converse.html and ..._ConverseStream.html). The
// stream uses the binary application/vnd.amazon.eventstream framing.

type bedrockRequest struct {
	Messages []struct {
		Role    string         `json:"role"`
		Content []bedrockBlock `json:"content"`
	} `json:"messages"`
	System []struct {
		Text string `json:"text"`
	} `json:"system"`
	InferenceConfig struct {
		MaxTokens int `json:"maxTokens"`
	} `json:"inferenceConfig"`
	ToolConfig struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string `json:"name"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
			} `json:"toolSpec"`
		} `json:"tools"`
		ToolChoice struct {
			Tool *struct {
				Name string `json:"name"`
			} `json:"tool"`
		} `json:"toolChoice"`
	} `json:"toolConfig"`
}

type bedrockBlock struct {
	Text       string          `json:"text"`
	Image      json.RawMessage `json:"image"`
	ToolResult *struct {
		Content []bedrockBlock `json:"content"`
	} `json:"toolResult"`
	JSON json.RawMessage `json:"json"` // in a tool result's content
}

// bedrockErrorTypes are the x-amzn-ErrorType of error statuses; other
// statuses get ValidationException (4xx) or InternalServerException (5xx).
var bedrockErrorTypes = map[int]string{
	400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
	408: "ModelTimeoutException", 424: "ModelErrorException", 429: "ThrottlingException",
	500: "InternalServerException", 503: "ServiceUnavailableException",
}

var eventStreamType = []string{"application/vnd.amazon.eventstream"}

// bedrockError writes {"message":...} with the error type in the
// x-amzn-ErrorType header; typ "" derives it from the status.
func (s *Server) bedrockError(w http.ResponseWriter, status int, msg, typ string) {
	if typ == "" {
		var ok bool
		if typ, ok = bedrockErrorTypes[status]; !ok {
			typ = "ValidationException"
			if status >= 500 {
				typ = "InternalServerException"
			}
		}
	}
	h := w.Header()
	h["X-Amzn-Errortype"] = []string{typ}
	h["X-Amzn-Requestid"] = []string{s.requestID()}
	buf := getBuf()
	defer putBuf(buf)
	b := append((*buf)[:0], `{"message":`...)
	b = append(appendString(b, msg), '}')
	*buf = b
	s.writeJSONError(w, status, b)
}

// requestID returns a fresh UUID-shaped request id.
func (s *Server) requestID() string {
	n := strconv.FormatInt(s.seq.Add(1), 10)
	return "00000000-0000-4000-8000-" + strings.Repeat("0", max(0, 12-len(n))) + n
}

func (s *Server) serveBedrock(w http.ResponseWriter, r *http.Request, o op, model string) {
	start := time.Now()
	auth := r.Header.Get("Authorization")
	buf := getBuf()
	defer putBuf(buf)
	body, ok := s.readRecorded(w, r, buf, bedrock, auth, "authorization")
	if !ok {
		return
	}
	switch {
	case auth == "":
		s.bedrockError(w, http.StatusForbidden, "Missing Authentication Token", "MissingAuthenticationTokenException")
		return
	case !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=") && !strings.HasPrefix(auth, "Bearer "):
		s.bedrockError(w, http.StatusBadRequest, "Authorization header requires 'Credential' parameter.", "IncompleteSignatureException")
		return
	}
	var req bedrockRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.bedrockError(w, http.StatusBadRequest, "Malformed input request: "+err.Error(), "")
		return
	}
	p := s.params()
	// Converse responses do not name the model: only its directives matter.
	if _, err := p.directives(r.Header, model); err != nil {
		s.bedrockError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	if len(req.Messages) == 0 {
		s.bedrockError(w, http.StatusBadRequest, "A conversation must start with a user message.", "")
		return
	}
	w.Header()["X-Amzn-Requestid"] = []string{s.requestID()}
	if s.inject(w, r.Context(), &p, bedrock) {
		return
	}
	t := bedrockTurn(&req)
	rp := t.plan(&p, o == opConverseStream)
	if o == opConverseStream {
		s.finish(s.bedrockStream(w, r.Context(), &p, &rp, start))
		return
	}
	b := append((*buf)[:0], `{"output":{"message":{"role":"assistant","content":[`...)
	if rp.text != "" {
		b = append(b, `{"text":`...)
		b = append(appendString(b, rp.text), '}')
	}
	if rp.tool != nil {
		if rp.text != "" {
			b = append(b, ',')
		}
		b = append(b, `{"toolUse":{"toolUseId":"tooluse_mock_1","name":`...)
		b = appendString(b, rp.tool.name)
		b = append(b, `,"input":`...)
		b = append(b, rp.args...)
		b = append(b, "}}"...)
	}
	b = append(b, `]}},"stopReason":"`...)
	b = append(b, bedrockStop(rp.stop)...)
	b = append(b, `","usage":`...)
	b = appendBedrockUsage(b, &rp)
	b = appendMetrics(b, start)
	*buf = append(b, '}')
	s.finish(s.writeBody(w, http.StatusOK, *buf, p.fault == faultMidStream))
}

func bedrockStop(stop int) string {
	switch stop {
	case stopTool:
		return "tool_use"
	case stopMax:
		return "max_tokens"
	}
	return "end_turn"
}

// appendBedrockUsage appends a TokenUsage: inputTokens excludes the tokens
// read from the cache, reported apart; totalTokens counts them all.
func appendBedrockUsage(b []byte, rp *reply) []byte {
	b = append(b, `{"inputTokens":`...)
	b = strconv.AppendInt(b, int64(rp.prompt-rp.cached-rp.written), 10)
	b = append(b, `,"outputTokens":`...)
	b = strconv.AppendInt(b, int64(rp.output), 10)
	b = append(b, `,"totalTokens":`...)
	b = strconv.AppendInt(b, int64(rp.prompt+rp.output), 10)
	if rp.cached > 0 || rp.written > 0 {
		b = append(b, `,"cacheReadInputTokens":`...)
		b = strconv.AppendInt(b, int64(rp.cached), 10)
		b = append(b, `,"cacheWriteInputTokens":`...)
		b = strconv.AppendInt(b, int64(rp.written), 10)
	}
	return append(b, '}')
}

// appendMetrics appends `,"metrics":{"latencyMs":N}` measured from start.
func appendMetrics(b []byte, start time.Time) []byte {
	b = append(b, `,"metrics":{"latencyMs":`...)
	b = strconv.AppendInt(b, time.Since(start).Milliseconds(), 10)
	return append(b, '}')
}

// bedrockStream writes the ConverseStream events, each an eventstream
// message: messageStart; for a text block contentBlockDelta... and
// contentBlockStop (Bedrock sends no contentBlockStart for text); for a tool
// call contentBlockStart (toolUseId, name), contentBlockDelta with input
// pieces, contentBlockStop; then messageStop and metadata. Every payload
// carries the "p" padding field Bedrock adds against length side channels.
func (s *Server) bedrockStream(w http.ResponseWriter, ctx context.Context, p *params, rp *reply, start time.Time) error {
	var off []int
	deltas := rp.deltas
	if rp.tool != nil {
		off = rp.pieces(p.chunks)
		deltas += len(off) - 1
	}
	st := s.startStream(w, ctx, p, eventStreamType, deltas)
	defer st.end()
	buf := getBuf()
	defer putBuf(buf)
	b := (*buf)[:0]
	defer func() { *buf = b }()
	var f frame
	ev := 0 // events sent, to vary the padding

	b, f = openFrame(b[:0], "messageStart")
	b = append(b, `{"p":"`...)
	b = appendPad(b, ev)
	b = append(b, `","role":"assistant"}`...)
	if err := st.send(closeFrame(b, f)); err != nil {
		return err
	}
	index := 0
	fr := bedrockFrames{st: st, b: b, ev: ev}
	if rp.deltas > 0 {
		if err := fr.text(rp); err != nil {
			b = fr.b
			return err
		}
		index++
	}
	if rp.tool != nil {
		if err := fr.tool(rp, index, off); err != nil {
			b = fr.b
			return err
		}
	}
	b, ev = fr.b, fr.ev
	ev++
	b, f = openFrame(b[:0], "messageStop")
	b = append(b, `{"p":"`...)
	b = appendPad(b, ev)
	b = append(b, `","stopReason":"`...)
	b = append(b, bedrockStop(rp.stop)...)
	b = append(b, `"}`...)
	b = closeFrame(b, f)
	ev++
	b, f = openFrame(b, "metadata")
	b = append(b, `{"metrics":{"latencyMs":`...)
	b = strconv.AppendInt(b, time.Since(start).Milliseconds(), 10)
	b = append(b, `},"p":"`...)
	b = appendPad(b, ev)
	b = append(b, `","usage":`...)
	b = append(appendBedrockUsage(b, rp), '}')
	return st.send(closeFrame(b, f))
}

// bedrockFrames sends the content-block frames of one response from buffer b; ev counts
// the events sent, to vary the padding.
type bedrockFrames struct {
	st *streamer
	b  []byte
	ev int
}

// text sends rp's text deltas as content block 0, then its stop.
func (fr *bedrockFrames) text(rp *reply) error {
	var f frame
	for i := range rp.deltas {
		if err := fr.st.delta(); err != nil {
			return err
		}
		fr.ev++
		fr.b, f = openFrame(fr.b[:0], "contentBlockDelta")
		fr.b = append(fr.b, `{"contentBlockIndex":0,"delta":{"text":"`...)
		fr.b = append(rp.delta(fr.b, i), `"},"p":"`...)
		fr.b = append(appendPad(fr.b, fr.ev), `"}`...)
		if err := fr.st.send(closeFrame(fr.b, f)); err != nil {
			return err
		}
	}
	fr.ev++
	fr.b, f = openFrame(fr.b[:0], "contentBlockStop")
	fr.b = append(fr.b, `{"contentBlockIndex":0,"p":"`...)
	fr.b = append(appendPad(fr.b, fr.ev), `"}`...)
	return fr.st.send(closeFrame(fr.b, f))
}

// tool sends rp's tool call as content block index, its arguments cut at the offsets off.
func (fr *bedrockFrames) tool(rp *reply, index int, off []int) error {
	var f frame
	idx := strconv.Itoa(index)
	fr.ev++
	fr.b, f = openFrame(fr.b[:0], "contentBlockStart")
	fr.b = append(fr.b, `{"contentBlockIndex":`...)
	fr.b = append(fr.b, idx...)
	fr.b = append(fr.b, `,"p":"`...)
	fr.b = appendPad(fr.b, fr.ev)
	fr.b = append(fr.b, `","start":{"toolUse":{"name":`...)
	fr.b = appendString(fr.b, rp.tool.name)
	fr.b = append(fr.b, `,"toolUseId":"tooluse_mock_1"}}}`...)
	if err := fr.st.send(closeFrame(fr.b, f)); err != nil {
		return err
	}
	for i := range len(off) - 1 {
		if err := fr.st.delta(); err != nil {
			return err
		}
		fr.ev++
		fr.b, f = openFrame(fr.b[:0], "contentBlockDelta")
		fr.b = append(fr.b, `{"contentBlockIndex":`...)
		fr.b = append(fr.b, idx...)
		fr.b = append(fr.b, `,"delta":{"toolUse":{"input":`...)
		fr.b = appendString(fr.b, string(rp.args[off[i]:off[i+1]]))
		fr.b = append(fr.b, `}},"p":"`...)
		fr.b = append(appendPad(fr.b, fr.ev), `"}`...)
		if err := fr.st.send(closeFrame(fr.b, f)); err != nil {
			return err
		}
	}
	fr.ev++
	fr.b, f = openFrame(fr.b[:0], "contentBlockStop")
	fr.b = append(fr.b, `{"contentBlockIndex":`...)
	fr.b = append(fr.b, idx...)
	fr.b = append(fr.b, `,"p":"`...)
	fr.b = append(appendPad(fr.b, fr.ev), `"}`...)
	return fr.st.send(closeFrame(fr.b, f))
}

// pad is the alphabet Bedrock's "p" padding values are prefixes of.
const pad = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// appendPad appends a padding value whose length varies with the event.
func appendPad(b []byte, ev int) []byte { return append(b, pad[:1+(ev*7)%len(pad)]...) }

// bedrockTurn digests a Converse request.
func bedrockTurn(req *bedrockRequest) *turn {
	t := &turn{maxTokens: req.InferenceConfig.MaxTokens}
	for _, sys := range req.System {
		t.systemBytes += len(sys.Text)
		t.promptChars += runeCount(sys.Text)
	}
	for i, m := range req.Messages {
		var result *string
		for _, bl := range m.Content {
			t.promptChars += runeCount(bl.Text)
			if len(bl.Image) > 0 {
				t.images++
			}
			if bl.ToolResult != nil {
				var text []byte
				for _, c := range bl.ToolResult.Content {
					text = append(text, c.Text...)
					if len(c.JSON) > 0 {
						text = append(text, jsonText(c.JSON)...)
					}
					if len(c.Image) > 0 {
						t.images++
					}
				}
				t.promptChars += len(text)
				if result == nil {
					s := string(text)
					result = &s
				}
			}
		}
		if i == len(req.Messages)-1 && result != nil {
			t.hasResult, t.result = true, *result
		}
	}
	for _, tl := range req.ToolConfig.Tools {
		if tl.ToolSpec != nil {
			t.tools = append(t.tools, tool{tl.ToolSpec.Name, tl.ToolSpec.InputSchema.JSON})
		}
	}
	if c := req.ToolConfig.ToolChoice.Tool; c != nil {
		t.choice = c.Name
	}
	return t
}

// frame is an eventstream message being appended: where it starts and the
// length of its headers.
type frame struct{ start, headers int }

// openFrame appends the prelude placeholder and the headers of an event
// message (:event-type, :content-type application/json, :message-type
// event); the caller appends the payload and calls closeFrame.
func openFrame(b []byte, eventType string) ([]byte, frame) {
	f := frame{start: len(b)}
	b = append(b, make([]byte, 12)...) // total length, headers length, prelude CRC
	b = appendHeader(b, ":event-type", eventType)
	b = appendHeader(b, ":content-type", "application/json")
	b = appendHeader(b, ":message-type", "event")
	f.headers = len(b) - f.start - 12
	return b, f
}

// appendHeader appends a string-valued (type 7) eventstream header.
func appendHeader(b []byte, name, value string) []byte {
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = append(b, 7)
	b = binary.BigEndian.AppendUint16(b, uint16(len(value)))
	return append(b, value...)
}

// closeFrame fills in the prelude and appends the message CRC.
func closeFrame(b []byte, f frame) []byte {
	m := b[f.start:]
	binary.BigEndian.PutUint32(m[0:], uint32(len(m)+4))
	binary.BigEndian.PutUint32(m[4:], uint32(f.headers))
	binary.BigEndian.PutUint32(m[8:], crc32.ChecksumIEEE(m[:8]))
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(m))
}
