package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
)

// ProbeKeyID is the key id test requests are recorded under.
const ProbeKeyID = "admin:model-test"

// TestModel sends a tiny chat request through a model's route, as a client
// would but without a key, budget or rate limit, and reports which
// deployment answered. It serves tollctl model test.
func (h *Handler) TestModel(ctx context.Context, req *pb.TestModelRequest) (*pb.TestModelResponse, error) {
	prompt := req.GetPrompt()
	if prompt == "" {
		prompt = "Say hello."
	}
	body, err := json.Marshal(map[string]any{
		"model": req.GetModel(), "max_tokens": 64, "stream": req.GetStream(),
		"messages": []map[string]string{{"role": "user", "content": prompt}},
	})
	if err != nil {
		return nil, err
	}
	scanned, err := routing.ScanRequest(body)
	if err != nil {
		return nil, err
	}
	st := h.cfg.State.State()
	route := st.Resolve(req.GetModel())
	if route == nil {
		return &pb.TestModelResponse{Status: http.StatusNotFound, Reply: "no route for model " + req.GetModel()}, nil
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
	if err != nil {
		return nil, err
	}
	rec := &Record{Start: time.Now(), Endpoint: routing.EndpointChat, RequestID: h.nextRequestID(),
		KeyID: ProbeKeyID, Model: route.Name, Stream: req.GetStream()}
	w := &demoWriter{header: http.Header{}}
	// A stream that breaks mid-way aborts with http.ErrAbortHandler, which
	// only net/http's server recovers: recover it here, where a gRPC
	// handler called.
	func() {
		defer func() {
			if p := recover(); p != nil {
				if p != http.ErrAbortHandler {
					panic(p)
				}
				rec.Status = http.StatusBadGateway
				w.status = http.StatusBadGateway
				w.body.Reset()
				w.body.WriteString(`{"error":{"message":"the upstream stream broke mid-way"}}`)
			}
		}()
		h.forward(w, hr, rec, st, route, body, &scanned)
	}()
	h.commit(rec)
	out := &pb.TestModelResponse{Status: int32(rec.Status), Route: route.Name, Deployment: rec.Deployment,
		Provider: rec.Provider, Attempts: uint32(rec.Attempts), LatencyMs: time.Since(rec.Start).Milliseconds(),
		PromptTokens: rec.Usage.PromptTokens, CompletionTokens: rec.Usage.CompletionTokens}
	if w.status == 0 {
		w.status = rec.Status
	}
	out.Status = int32(w.status)
	out.Reply = replyText(w.body.Bytes(), req.GetStream(), w.status)
	return out, nil
}

// replyText extracts the assistant's text (or the error message) from an
// OpenAI-format answer.
func replyText(b []byte, stream bool, status int) string {
	if status >= 300 {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return e.Error.Message
		}
		return strings.TrimSpace(string(b))
	}
	if !stream {
		var r translate.ChatResponse
		if json.Unmarshal(b, &r) == nil && len(r.Choices) > 0 {
			m := r.Choices[0].Message
			if s := m.Content.String(); s != "" || len(m.ToolCalls) == 0 {
				return s
			}
			return "(tool call " + m.ToolCalls[0].Function.Name + " " + m.ToolCalls[0].Function.Arguments + ")"
		}
		return string(b)
	}
	var sb strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c translate.Chunk
		if json.Unmarshal([]byte(data), &c) == nil {
			for _, ch := range c.Choices {
				if ch.Delta.Content != nil {
					sb.WriteString(*ch.Delta.Content)
				}
			}
		}
	}
	return sb.String()
}
