package translate

import (
	"encoding/json"
	"io"
	"strings"
)

// CompletionsInbound is OpenAI's legacy completions API (POST
// /v1/completions) as an inbound format, for deployments of providers that
// have no such endpoint: the prompt becomes one user message, and the chat
// answer's text comes back as the completion's text. OpenAI-wire
// deployments get the legacy request as it is (the proxy's pass-through).
//
// The rule: a prompt that is a string, or an array of one string, is
// carried; several prompts, token-array prompts, best_of, echo, suffix and
// logprobs are refused with a 400 (a chat model cannot honour them);
// sampling fields that chat shares (max_tokens, temperature, top_p, stop,
// seed, penalties, user) are carried, others dropped.
var CompletionsInbound Inbound = completionsInbound{}

type completionsInbound struct{}

type completionsRequest struct {
	Model            string          `json:"model"`
	Prompt           json.RawMessage `json:"prompt"`
	MaxTokens        *int64          `json:"max_tokens"`
	Temperature      *float64        `json:"temperature"`
	TopP             *float64        `json:"top_p"`
	N                *int64          `json:"n"`
	Stop             StringList      `json:"stop"`
	Stream           bool            `json:"stream"`
	StreamOptions    *StreamOptions  `json:"stream_options"`
	Seed             *int64          `json:"seed"`
	PresencePenalty  *float64        `json:"presence_penalty"`
	FrequencyPenalty *float64        `json:"frequency_penalty"`
	User             string          `json:"user"`
	BestOf           *int64          `json:"best_of"`
	Echo             bool            `json:"echo"`
	Suffix           *string         `json:"suffix"`
	Logprobs         *int64          `json:"logprobs"`
}

func (completionsInbound) DecodeRequest(body []byte) (*ChatRequest, error) {
	var r completionsRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, Invalid("", "We could not parse the JSON body of your request: %v", err)
	}
	prompt, err := completionPrompt(r.Prompt)
	if err != nil {
		return nil, err
	}
	switch {
	case r.BestOf != nil && *r.BestOf > 1:
		return nil, Invalid("best_of", "'best_of' above 1 is not supported by this model's provider.")
	case r.Echo:
		return nil, Invalid("echo", "'echo' is not supported by this model's provider.")
	case r.Suffix != nil && *r.Suffix != "":
		return nil, Invalid("suffix", "'suffix' is not supported by this model's provider.")
	case r.Logprobs != nil:
		return nil, Invalid("logprobs", "'logprobs' is not supported by this model's provider.")
	}
	c := &ChatRequest{
		Model: r.Model, Messages: []Message{{Role: "user", Content: TextContent(prompt)}},
		MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, N: r.N, Stop: r.Stop,
		Stream: r.Stream, Seed: r.Seed, PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty,
		User: r.User,
	}
	if r.MaxTokens == nil {
		sixteen := int64(16) // the legacy API's documented default
		c.MaxTokens = &sixteen
	}
	if r.Stream {
		c.StreamOptions = &StreamOptions{IncludeUsage: r.StreamOptions != nil && r.StreamOptions.IncludeUsage}
	}
	return c, nil
}

// completionPrompt reads a prompt that is a string or an array of one
// string.
func completionPrompt(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", Invalid("prompt", "'prompt' is required.")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		if len(list) == 1 {
			return list[0], nil
		}
		return "", Invalid("prompt", "Only one prompt per request is supported by this model's provider; send %d requests.", len(list))
	}
	return "", Invalid("prompt", "'prompt' must be a string here; token arrays are not supported by this model's provider.")
}

type completionChoice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type completionBody struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

func (completionsInbound) EncodeResponse(resp *ChatResponse) ([]byte, error) {
	out := completionBody{ID: completionID(resp.ID), Object: "text_completion", Created: resp.Created,
		Model: resp.Model, Usage: resp.Usage}
	for _, ch := range resp.Choices {
		fr := ch.FinishReason
		if fr == FinishToolCalls {
			fr = FinishStop
		}
		out.Choices = append(out.Choices, completionChoice{Text: ch.Message.Content.String(), Index: ch.Index, FinishReason: &fr})
	}
	if out.Choices == nil {
		out.Choices = []completionChoice{}
	}
	return json.Marshal(out)
}

func completionID(id string) string {
	if rest, ok := strings.CutPrefix(id, "chatcmpl-"); ok {
		return "cmpl-" + rest
	}
	if id == "" {
		return "cmpl-tollgate"
	}
	return id
}

func (completionsInbound) NewStreamEncoder(w io.Writer, model string) StreamEncoder {
	return &completionsEncoder{w: w, model: model}
}

func (completionsInbound) EncodeError(e *Error) []byte { return EncodeOpenAIError(e) }

// completionsEncoder writes chat chunks as legacy completion chunks; the
// usage chunk only when the client asked for it (SetIncludeUsage).
type completionsEncoder struct {
	w            io.Writer
	model        string
	includeUsage bool
	buf          []byte
}

func (e *completionsEncoder) write(v any) error { return writeDataEvent(e.w, &e.buf, v) }

func (e *completionsEncoder) WriteChunk(c *Chunk) error {
	out := completionBody{ID: completionID(c.ID), Object: "text_completion", Created: c.Created, Model: e.model}
	for _, ch := range c.Choices {
		text := ""
		if ch.Delta.Content != nil {
			text = *ch.Delta.Content
		}
		fr := ch.FinishReason
		if fr != nil && *fr == FinishToolCalls {
			stop := FinishStop
			fr = &stop
		}
		if text == "" && fr == nil {
			continue // a role-only or tool-call delta: nothing to say
		}
		out.Choices = append(out.Choices, completionChoice{Text: text, Index: ch.Index, FinishReason: fr})
	}
	if len(out.Choices) == 0 {
		if c.Usage == nil || !e.includeUsage {
			return nil
		}
		out.Choices = []completionChoice{}
	}
	if e.includeUsage {
		out.Usage = c.Usage
	}
	return e.write(out)
}

func (e *completionsEncoder) Close(*Usage) error {
	_, err := io.WriteString(e.w, "data: [DONE]\n\n")
	return err
}

func (e *completionsEncoder) Fail(err *Error) error {
	e.buf = append(append(append(e.buf[:0], "data: "...), EncodeOpenAIError(err)...), "\n\n"...)
	_, werr := e.w.Write(e.buf)
	return werr
}
