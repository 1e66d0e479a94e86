package mock

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
)

// The Anthropic Messages API: POST /v1/messages and /v1/messages/count_tokens
// (also without the /v1), as documented at docs.claude.com/en/api/messages,
// .../messages-streaming and .../errors.

// anthropicRequest holds the fields of a Messages request the mock looks at.
type anthropicRequest struct {
	Model     string `json:"model"`
	MaxTokens *int   `json:"max_tokens"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string or an array of content blocks
	} `json:"messages"`
	System json.RawMessage `json:"system"` // a string or an array of text blocks
	Stream bool            `json:"stream"`
	Tools  []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice struct {
		Type string `json:"type"` // auto, any, tool, none
		Name string `json:"name"`
	} `json:"tool_choice"`
}

// anthropicBlock is a content block; Content is a tool_result's content.
type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
}

// anthropicErrorTypes are the error types of Anthropic's HTTP errors; other
// statuses get invalid_request_error (4xx) or api_error (5xx).
var anthropicErrorTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
	403: "permission_error", 404: "not_found_error", 413: "request_too_large",
	429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error",
}

// anthropicError writes {"type":"error","error":{"type":...,"message":...}}.
func (s *Server) anthropicError(w http.ResponseWriter, status int, msg string) {
	typ, ok := anthropicErrorTypes[status]
	if !ok {
		typ = "invalid_request_error"
		if status >= 500 {
			typ = "api_error"
		}
	}
	h := w.Header()
	h["Request-Id"] = []string{"req_mock_" + strconv.FormatInt(s.seq.Add(1), 10)}
	if status == http.StatusTooManyRequests {
		h["Retry-After"] = []string{"1"}
	}
	buf := getBuf()
	defer putBuf(buf)
	b := append((*buf)[:0], `{"type":"error","error":{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","message":`...)
	b = appendString(b, msg)
	b = append(b, "}}"...)
	*buf = b
	s.writeJSONError(w, status, b)
}

func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request, o op) {
	auth, source := r.Header.Get("X-Api-Key"), "x-api-key"
	if auth == "" {
		auth, source = r.Header.Get("Authorization"), "authorization"
	}
	buf := getBuf()
	defer putBuf(buf)
	body, ok := s.readRecorded(w, r, buf, anthropic, auth, source)
	if !ok {
		return
	}
	fail := func(status int, msg string) { s.anthropicError(w, status, msg) }
	if auth == "" {
		fail(http.StatusUnauthorized, "x-api-key header is required")
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		fail(http.StatusBadRequest, "anthropic-version: header is required")
		return
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		fail(http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	p := s.params()
	model, err := p.directives(r.Header, req.Model)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	if msg := anthropicInvalid(o, &req); msg != "" {
		fail(http.StatusBadRequest, msg)
		return
	}
	t := anthropicTurn(&req)
	if s.inject(w, r.Context(), &p, anthropic) {
		return
	}
	if o == opCountTokens {
		rp := t.plan(&p, false)
		b := strconv.AppendInt(append((*buf)[:0], `{"input_tokens":`...), int64(rp.prompt-rp.written), 10)
		*buf = append(b, '}')
		s.finish(s.writeBody(w, http.StatusOK, *buf, p.fault == faultMidStream))
		return
	}
	rp := t.plan(&p, req.Stream)
	id := "msg_mock_" + strconv.FormatInt(s.seq.Add(1), 10)
	w.Header()["Request-Id"] = []string{"req_mock_" + id[len("msg_mock_"):]}
	if req.Stream {
		s.finish(s.anthropicStream(w, r.Context(), &p, id, model, &rp))
		return
	}
	*buf = appendAnthropicMessage((*buf)[:0], id, model, &rp)
	s.finish(s.writeBody(w, http.StatusOK, *buf, p.fault == faultMidStream))
}

// anthropicInvalid returns the error message Anthropic gives for a request that misses a
// required field, "" for a valid one.
func anthropicInvalid(o op, req *anthropicRequest) string {
	switch {
	case req.Model == "":
		return "model: Field required"
	case len(req.Messages) == 0:
		return "messages: Field required"
	case o == opMessages && req.MaxTokens == nil:
		return "max_tokens: Field required"
	case o == opMessages && *req.MaxTokens < 1:
		return "max_tokens: Input should be greater than or equal to 1"
	}
	return ""
}

// appendAnthropicMessage appends the non-streamed Messages response for rp.
func appendAnthropicMessage(b []byte, id, model string, rp *reply) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendString(b, model)
	b = append(b, `,"content":[`...)
	if rp.text != "" {
		b = append(b, `{"type":"text","text":`...)
		b = append(appendString(b, rp.text), '}')
	}
	if rp.tool != nil {
		if rp.text != "" {
			b = append(b, ',')
		}
		b = appendToolUse(b, rp)
	}
	b = append(b, `],"stop_reason":"`...)
	b = append(b, anthropicStop(rp.stop)...)
	b = append(b, `","stop_sequence":null,"usage":`...)
	b = appendAnthropicUsage(b, rp, rp.output)
	return append(b, '}')
}

func anthropicStop(stop int) string {
	switch stop {
	case stopTool:
		return "tool_use"
	case stopMax:
		return "max_tokens"
	}
	return "end_turn"
}

// appendToolUse appends a tool_use block; its input is {} when rp.args is
// nil, as in a stream's content_block_start.
func appendToolUse(b []byte, rp *reply) []byte {
	b = append(b, `{"type":"tool_use","id":"toolu_mock_1","name":`...)
	b = appendString(b, rp.tool.name)
	b = append(b, `,"input":`...)
	if rp.args == nil {
		return append(b, "{}}"...)
	}
	b = append(b, rp.args...)
	return append(b, '}')
}

// appendAnthropicUsage appends a usage object. Anthropic's input_tokens
// excludes the tokens read from the cache, reported apart.
func appendAnthropicUsage(b []byte, rp *reply, output int) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(rp.prompt-rp.cached-rp.written), 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(rp.written), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(rp.cached), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(output), 10)
	return append(b, '}')
}

// anthropicStream writes the event sequence of a streamed message:
// message_start, then per content block content_block_start (ping after the
// first), content_block_delta..., content_block_stop, then message_delta and
// message_stop. A tool call's input streams as input_json_delta pieces.
func (s *Server) anthropicStream(w http.ResponseWriter, ctx context.Context, p *params, id, model string, rp *reply) error {
	var off []int
	if rp.tool != nil {
		off = rp.pieces(p.chunks)
	}
	deltas := rp.deltas
	if off != nil {
		deltas += len(off) - 1
	}
	st := s.startStream(w, ctx, p, sseType, deltas)
	defer st.end()
	buf := getBuf()
	defer putBuf(buf)
	b := (*buf)[:0]
	defer func() { *buf = b }()

	b = append(b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\""...)
	b = append(b, id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendString(b, model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	b = appendAnthropicUsage(b, rp, 1)
	b = append(b, "}}\n\n"...)
	if err := st.send(b); err != nil {
		return err
	}
	index := 0
	if rp.deltas > 0 {
		var err error
		if b, err = anthropicTextBlock(st, b, rp); err != nil {
			return err
		}
		index++
	}
	if rp.tool != nil {
		var err error
		if b, err = anthropicToolBlock(st, b, rp, index, off); err != nil {
			return err
		}
	}
	b = append(b[:0], "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\""...)
	b = append(b, anthropicStop(rp.stop)...)
	b = append(b, `","stop_sequence":null},"usage":{"output_tokens":`...)
	b = strconv.AppendInt(b, int64(rp.output), 10)
	b = append(b, "}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
	return st.send(b)
}

// anthropicTextBlock streams the text content block (always index 0) of rp, in b.
func anthropicTextBlock(st *streamer, b []byte, rp *reply) ([]byte, error) {
	b = append(b[:0], "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"...)
	b = append(b, "event: ping\ndata: {\"type\": \"ping\"}\n\n"...)
	if err := st.send(b); err != nil {
		return b, err
	}
	for i := range rp.deltas {
		if err := st.delta(); err != nil {
			return b, err
		}
		b = append(b[:0], "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\""...)
		b = append(rp.delta(b, i), "\"}}\n\n"...)
		if err := st.send(b); err != nil {
			return b, err
		}
	}
	b = append(b[:0], "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"...)
	return b, st.send(b)
}

// anthropicToolBlock streams rp's tool call as the content block index, its arguments cut
// at the offsets off, in b.
func anthropicToolBlock(st *streamer, b []byte, rp *reply, index int, off []int) ([]byte, error) {
	idx := strconv.Itoa(index)
	b = append(b[:0], "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	b = append(b, idx...)
	b = append(b, `,"content_block":`...)
	b = append(appendToolUse(b, &reply{tool: rp.tool}), "}\n\n"...)
	if index == 0 {
		b = append(b, "event: ping\ndata: {\"type\": \"ping\"}\n\n"...)
	}
	if err := st.send(b); err != nil {
		return b, err
	}
	for i := range len(off) - 1 {
		if err := st.delta(); err != nil {
			return b, err
		}
		b = append(b[:0], "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
		b = append(b, idx...)
		b = append(b, `,"delta":{"type":"input_json_delta","partial_json":`...)
		b = appendString(b, string(rp.args[off[i]:off[i+1]]))
		b = append(b, "}}\n\n"...)
		if err := st.send(b); err != nil {
			return b, err
		}
	}
	b = append(b[:0], "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	b = append(b, idx...)
	b = append(b, "}\n\n"...)
	return b, st.send(b)
}

// anthropicTurn digests a Messages request.
func anthropicTurn(req *anthropicRequest) *turn {
	t := &turn{}
	if req.MaxTokens != nil {
		t.maxTokens = *req.MaxTokens
	}
	sys, _ := anthropicContent(req.System, t)
	t.systemBytes = len(sys)
	t.promptChars += runeCount(sys)
	for i, m := range req.Messages {
		text, result := anthropicContent(m.Content, t)
		t.promptChars += runeCount(text)
		if i == len(req.Messages)-1 && result != nil {
			t.hasResult, t.result = true, *result
		}
	}
	for _, tl := range req.Tools {
		t.tools = append(t.tools, tool{tl.Name, tl.InputSchema})
	}
	switch req.ToolChoice.Type {
	case "none":
		t.choice = choiceNone
	case "tool":
		t.choice = req.ToolChoice.Name
	}
	return t
}

// anthropicContent returns the text of content (a string or an array of
// blocks; tool results included) and the text of its first tool_result
// block (nil if none), and counts its images into t.
func anthropicContent(raw json.RawMessage, t *turn) (string, *string) {
	if len(raw) == 0 || raw[0] != '[' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil
	}
	var blocks []anthropicBlock
	_ = json.Unmarshal(raw, &blocks)
	var text []byte
	var result *string
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			text = append(text, bl.Text...)
		case "image":
			t.images++
		case "tool_result":
			rt, _ := anthropicContent(bl.Content, t)
			text = append(text, rt...)
			if result == nil {
				result = &rt
			}
		}
	}
	return string(text), result
}
