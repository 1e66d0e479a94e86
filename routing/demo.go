package routing

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ServeDemo answers a request for a deployment of the demo provider inside
// the gateway, in OpenAI's response shapes. It exists so that a fresh
// install answers its first request offline; it echoes the last user
// message. It reports the usage it made up, and calls beforeLast (when not
// nil) with it just before the answer's last bytes are written, where the
// gateway records the request.
func ServeDemo(w http.ResponseWriter, e Endpoint, model string, body []byte, req *Request, beforeLast func(Usage)) Usage {
	if beforeLast == nil {
		beforeLast = func(Usage) {}
	}
	now := time.Now().Unix()
	prompt := demoPrompt(e, body)
	u := Usage{PromptTokens: approxTokens(prompt), Present: true}
	if e == EndpointEmbeddings {
		return serveDemoEmbedding(w, model, prompt, u, beforeLast)
	}
	if len(prompt) > 200 {
		prompt = prompt[:200] + "…"
	}
	answer := "Hello from Tollgate's offline demo model. Add a real model route with tollctl to reach a provider."
	if prompt != "" {
		answer += " You said: " + prompt
	}
	u.CompletionTokens = approxTokens(answer)
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	a := demoAnswer{
		e: e, id: "demo-" + strconv.FormatInt(time.Now().UnixNano(), 36), created: now, model: model, text: answer,
		usage:  map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens},
		object: "chat.completion", chunkObject: "chat.completion.chunk",
	}
	if e == EndpointCompletions {
		a.object, a.chunkObject = "text_completion", "text_completion" // OpenAI streams these unchanged
	}
	if !req.Stream {
		choice := map[string]any{"index": 0, "finish_reason": "stop"}
		if e == EndpointChat {
			choice["message"] = map[string]any{"role": "assistant", "content": answer}
		} else {
			choice["text"] = answer
		}
		beforeLast(u)
		writeJSON(w, map[string]any{"id": a.id, "object": a.object, "created": now, "model": model,
			"choices": []any{choice}, "usage": a.usage})
		return u
	}
	a.stream(w, req.IncludeUsage, func() { beforeLast(u) })
	return u
}

// demoPrompt is the text the demo model answers: the last user message of
// a chat, the prompt of a completion, the input of an embedding.
func demoPrompt(e Endpoint, body []byte) string {
	var in struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Prompt json.RawMessage `json:"prompt"`
		Input  json.RawMessage `json:"input"`
	}
	_ = json.Unmarshal(body, &in)
	var prompt string
	switch e {
	case EndpointChat:
		for _, m := range in.Messages {
			if m.Role == "user" {
				prompt = textOf(m.Content)
			}
		}
	case EndpointCompletions:
		prompt = textOf(in.Prompt)
	case EndpointEmbeddings:
		prompt = textOf(in.Input)
	}
	return prompt
}

// serveDemoEmbedding answers an embeddings request with a made-up vector.
func serveDemoEmbedding(w http.ResponseWriter, model, prompt string, u Usage, beforeLast func(Usage)) Usage {
	u.TotalTokens = u.PromptTokens
	vec := make([]float64, 8)
	for i := range vec {
		vec[i] = float64(len(prompt)%(i+7)) / 10
	}
	beforeLast(u)
	writeJSON(w, map[string]any{
		"object": "list", "model": model,
		"data":  []any{map[string]any{"object": "embedding", "index": 0, "embedding": vec}},
		"usage": map[string]any{"prompt_tokens": u.PromptTokens, "total_tokens": u.TotalTokens},
	})
	return u
}

// demoAnswer is the demo model's answer to a chat or completion request.
type demoAnswer struct {
	e                   Endpoint
	id, model, text     string
	object, chunkObject string
	created             int64
	usage               map[string]any
}

// stream writes the answer as an event stream, one word a chunk, then
// the usage chunk when includeUsage; beforeLast runs before [DONE].
func (a *demoAnswer) stream(w http.ResponseWriter, includeUsage bool, beforeLast func()) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = w.Write(append(append([]byte("data: "), b...), '\n', '\n'))
		if fl != nil {
			fl.Flush()
		}
	}
	words := strings.SplitAfter(a.text, " ")
	for i, word := range words {
		choice := map[string]any{"index": 0, "finish_reason": nil}
		if a.e == EndpointChat {
			delta := map[string]any{"content": word}
			if i == 0 {
				delta["role"] = "assistant"
			}
			choice["delta"] = delta
		} else {
			choice["text"] = word
		}
		if i == len(words)-1 {
			choice["finish_reason"] = "stop"
		}
		send(map[string]any{"id": a.id, "object": a.chunkObject, "created": a.created, "model": a.model, "choices": []any{choice}})
	}
	if includeUsage {
		send(map[string]any{"id": a.id, "object": a.chunkObject, "created": a.created, "model": a.model, "choices": []any{}, "usage": a.usage})
	}
	beforeLast()
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	if fl != nil {
		fl.Flush()
	}
}

// textOf returns the text of a content value: a string, an array of
// strings, or an array of content parts with "text".
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		var part struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(p, &s) == nil {
			b.WriteString(s)
		} else if json.Unmarshal(p, &part) == nil {
			b.WriteString(part.Text)
		}
	}
	return b.String()
}

// approxTokens estimates tokens as one per four bytes, at least one.
func approxTokens(s string) int64 { return int64(len(s)/4) + 1 }

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
