package translate

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Bedrock is the Amazon Bedrock Converse adapter (provider kind
// "bedrock"). It calls POST {base}/model/{modelId}/converse, or
// /converse-stream for streams (answered in the binary event-stream
// framing, see eventstream.go).
//
// Target.Options["region"] is required. Target.BaseURL defaults to
// BedrockBaseURL(region); a custom one (a mock, a VPC endpoint) is used
// as given. Target.Credential is either "ACCESS_KEY_ID:SECRET_ACCESS_KEY"
// or "ACCESS_KEY_ID:SECRET_ACCESS_KEY:SESSION_TOKEN", signed with SigV4
// (service "bedrock"), or a Bedrock API key (no ':'), sent as a bearer
// token without SigV4.
//
// Request translation (canonical -> Converse):
//   - system and developer messages become the top-level system blocks,
//     in order, wherever they appear in the conversation;
//   - user content becomes text and image blocks. Images must be base64
//     data: URLs (png, jpeg, gif, webp): Converse takes image bytes, not
//     URLs, so http(s) image URLs are refused, as are input_audio and
//     file parts;
//   - assistant tool_calls become toolUse blocks, tool messages become
//     toolResult blocks in a user message ({json} when the result is a
//     JSON object, {text} otherwise); consecutive messages of the same
//     Converse role are merged, since Converse requires alternation;
//     empty text is omitted, and a message left empty is dropped;
//   - tools become toolConfig.tools; tool_choice auto/required/function
//     become {auto}/{any}/{tool}, and no tool_choice sends no toolChoice
//     (the model's default, auto). Converse has no "none": tool_choice
//     "none" drops the tools. Because Converse refuses toolUse/toolResult
//     blocks without a toolConfig, when no tools are sent the tool calls
//     and results of the history are written as text blocks
//     ("[Tool call NAME (ID) with arguments ARGS]" and
//     "[Tool result for ID]\n...") so that the model still sees them;
//   - max_completion_tokens/max_tokens, temperature, top_p and stop go to
//     inferenceConfig; top_k goes to additionalModelRequestFields.top_k;
//   - refused (400 naming the field): n > 1, logprobs, response_format
//     json_schema and json_object (Converse has no JSON mode);
//   - dropped: seed, presence_penalty, frequency_penalty, user,
//     metadata, parallel_tool_calls, reasoning_effort, function
//     "strict", stream_options, message names.
//
// Response translation: text blocks are joined into the message content,
// toolUse blocks become tool_calls, reasoningContent is dropped (the
// canonical form has no field for it). Bedrock returns no completion id,
// so one is generated ("chatcmpl-br-..."). Usage: prompt_tokens is
// inputTokens + cacheReadInputTokens + cacheWriteInputTokens, cached
// tokens are cacheReadInputTokens.
var Bedrock Provider = bedrockProvider{}

const bedrockName = "bedrock"

// bedrockNow is the clock used for SigV4 dates and response timestamps;
// tests replace it.
var bedrockNow = time.Now

// BedrockBaseURL returns the Bedrock runtime endpoint of region.
func BedrockBaseURL(region string) string {
	return "https://bedrock-runtime." + region + ".amazonaws.com"
}

type bedrockProvider struct{}

// ---- wire types ----

type brRequest struct {
	Messages                     []brMessage        `json:"messages"`
	System                       []brSystemBlock    `json:"system,omitempty"`
	InferenceConfig              *brInferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig                   *brToolConfig      `json:"toolConfig,omitempty"`
	AdditionalModelRequestFields map[string]any     `json:"additionalModelRequestFields,omitempty"`
}

type brMessage struct {
	Role    string    `json:"role"`
	Content []brBlock `json:"content"`
}

type brBlock struct {
	Text       *string       `json:"text,omitempty"`
	Image      *brImage      `json:"image,omitempty"`
	ToolUse    *brToolUse    `json:"toolUse,omitempty"`
	ToolResult *brToolResult `json:"toolResult,omitempty"`
	CachePoint *brCachePoint `json:"cachePoint,omitempty"`
}

// brCachePoint marks the end of a prompt prefix to cache: Converse's form
// of Anthropic's cache_control.
type brCachePoint struct {
	Type string `json:"type"` // "default"
}

var brDefaultCachePoint = &brCachePoint{Type: "default"}

type brImage struct {
	Format string        `json:"format"`
	Source brImageSource `json:"source"`
}

type brImageSource struct {
	Bytes string `json:"bytes"` // base64, as the JSON protocol carries blobs
}

type brToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type brToolResult struct {
	ToolUseID string              `json:"toolUseId"`
	Content   []brToolResultBlock `json:"content"`
}

type brToolResultBlock struct {
	Text  *string         `json:"text,omitempty"`
	JSON  json.RawMessage `json:"json,omitempty"`
	Image *brImage        `json:"image,omitempty"`
}

type brSystemBlock struct {
	Text       string        `json:"text,omitempty"`
	CachePoint *brCachePoint `json:"cachePoint,omitempty"`
}

type brInferenceConfig struct {
	MaxTokens     *int64   `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type brToolConfig struct {
	Tools      []brTool      `json:"tools"`
	ToolChoice *brToolChoice `json:"toolChoice,omitempty"`
}

type brTool struct {
	ToolSpec   *brToolSpec   `json:"toolSpec,omitempty"`
	CachePoint *brCachePoint `json:"cachePoint,omitempty"`
}

type brToolSpec struct {
	Name        string        `json:"name"`
	Description string        `json:"description,omitempty"`
	InputSchema brInputSchema `json:"inputSchema"`
}

type brInputSchema struct {
	JSON json.RawMessage `json:"json"`
}

type brToolChoice struct {
	Auto *struct{}   `json:"auto,omitempty"`
	Any  *struct{}   `json:"any,omitempty"`
	Tool *brToolName `json:"tool,omitempty"`
}

type brToolName struct {
	Name string `json:"name"`
}

type brResponse struct {
	Output *struct {
		Message *struct {
			Role    string        `json:"role"`
			Content []brRespBlock `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string   `json:"stopReason"`
	Usage      *brUsage `json:"usage"`
}

type brRespBlock struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
	// reasoningContent, image and other blocks are not carried.
}

type brUsage struct {
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
	CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
}

// ---- request ----

// NewRequest encodes req as a Converse (or ConverseStream) request for t
// and signs it. Refusals of the request are *Error; a deployment that
// cannot be called (no region, no model, a malformed credential) is a
// plain error.
func (bedrockProvider) NewRequest(req *ChatRequest, t *Target, stream bool) (*http.Request, error) {
	region := t.Options["region"]
	if region == "" {
		return nil, errors.New("bedrock: the deployment has no region (option \"region\")")
	}
	if !bedrockValidRegion(region) {
		return nil, fmt.Errorf("bedrock: region %q is not a valid AWS region name", region)
	}
	if t.UpstreamModel == "" {
		return nil, errors.New("bedrock: the deployment has no upstream model id")
	}
	cred, err := bedrockParseCredential(t.Credential)
	if err != nil {
		return nil, err
	}

	caching := bedrockCaches(t.UpstreamModel)
	switch t.Options["prompt_caching"] {
	case "on":
		caching = true
	case "off":
		caching = false
	}
	wire, err := bedrockEncode(req, caching, caching && bedrockCachesTools(t.UpstreamModel, t.Options["prompt_caching"]))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(wire); err != nil {
		return nil, Invalid("", "The request could not be encoded for Bedrock: %v", err)
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))

	base := strings.TrimRight(t.BaseURL, "/")
	if base == "" {
		base = BedrockBaseURL(region)
	}
	op, accept := "converse", "application/json"
	if stream {
		op, accept = "converse-stream", "application/vnd.amazon.eventstream"
	}
	u := base + "/model/" + sigV4Escape(t.UpstreamModel, false) + "/" + op
	hr, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bedrock: bad endpoint URL: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", accept)
	if cred.apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+cred.apiKey)
	} else {
		SignV4(hr, body, cred.accessKey, cred.secretKey, cred.sessionToken, region, "bedrock", bedrockNow())
	}
	return hr, nil
}

type bedrockCredential struct {
	apiKey                             string
	accessKey, secretKey, sessionToken string
}

// bedrockParseCredential reads "AKID:SECRET[:TOKEN]" or an API key. Its
// errors never quote the credential.
func bedrockParseCredential(s string) (bedrockCredential, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return bedrockCredential{}, errors.New("bedrock: the deployment has no credential (ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN] or a Bedrock API key)")
	}
	if !strings.Contains(s, ":") {
		return bedrockCredential{apiKey: s}, nil
	}
	parts := strings.SplitN(s, ":", 3)
	if parts[0] == "" || parts[1] == "" {
		return bedrockCredential{}, errors.New("bedrock: the credential must be ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN] with both keys non-empty")
	}
	c := bedrockCredential{accessKey: parts[0], secretKey: parts[1]}
	if len(parts) == 3 {
		c.sessionToken = parts[2]
	}
	return c, nil
}

func bedrockValidRegion(r string) bool {
	if len(r) > 64 {
		return false
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// bedrockEncodeRequest maps the canonical request to a Converse body.
func bedrockEncodeRequest(req *ChatRequest) (*brRequest, error) {
	return bedrockEncode(req, true, true)
}

// bedrockCachingClaude matches the Claude model ids Bedrock caches prompts
// for: 3.7 Sonnet, 3.5 Haiku, and the 4-and-later names (claude-sonnet-4,
// claude-opus-4-1, claude-haiku-4-5, ...). Claude 3 and 3.5 Sonnet, v2 and
// Instant refuse a cachePoint (AccessDeniedException).
var bedrockCachingClaude = regexp.MustCompile(`claude-3-7-sonnet|claude-3-5-haiku|claude-(sonnet|opus|haiku)-[4-9]`)

// bedrockCachingNova matches the Nova models with prompt caching.
var bedrockCachingNova = regexp.MustCompile(`nova-(micro|lite|pro|premier)`)

// bedrockCaches reports whether a Bedrock model id (or inference profile)
// takes cachePoint blocks. Requests to other models go without: uncached,
// but not refused. The deployment option prompt_caching overrides it
// (application inference profile ARNs do not name their model).
func bedrockCaches(model string) bool {
	m := strings.ToLower(model)
	return bedrockCachingClaude.MatchString(m) || bedrockCachingNova.MatchString(m)
}

// bedrockCachesTools reports whether a model takes a cachePoint among its
// tools: Claude does, Nova caches only system and messages.
func bedrockCachesTools(model, option string) bool {
	m := strings.ToLower(model)
	return !bedrockCachingNova.MatchString(m) && (option == "on" || bedrockCachingClaude.MatchString(m))
}

// bedrockEncode encodes req; cache writes its prompt-cache breakpoints as
// cachePoint blocks, and cacheTools those after tool definitions too.
func bedrockEncode(req *ChatRequest, cache, cacheTools bool) (*brRequest, error) {
	if req.N != nil && *req.N > 1 {
		return nil, Unsupported("n", bedrockName)
	}
	if req.Logprobs != nil && *req.Logprobs {
		return nil, Unsupported("logprobs", bedrockName)
	}
	if err := bedrockCheckResponseFormat(req.ResponseFormat); err != nil {
		return nil, err
	}

	out := &brRequest{}
	toolConfig, err := bedrockToolConfig(req, cacheTools)
	if err != nil {
		return nil, err
	}
	out.ToolConfig = toolConfig

	b := bedrockMessageBuilder{flattenTools: toolConfig == nil, cache: cache}
	for i := range req.Messages {
		if err := b.add(&req.Messages[i], i); err != nil {
			return nil, err
		}
	}
	if len(b.msgs) == 0 {
		return nil, Invalid("messages", "The request has no user or assistant message with content; Bedrock needs at least one.")
	}
	if b.msgs[0].Role != "user" {
		// Converse: "A conversation must start with a user message".
		b.msgs = append([]brMessage{{Role: "user", Content: []brBlock{{Text: &bedrockContinue}}}}, b.msgs...)
	}
	out.Messages = b.msgs
	out.System = b.system

	ic := brInferenceConfig{Temperature: req.Temperature, TopP: req.TopP}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 1) {
		clamped := min(max(*t, 0), 1) // Converse takes 0..1; OpenAI's scale goes to 2
		ic.Temperature = &clamped
	}
	if limit := req.OutputLimit(); limit > 0 {
		ic.MaxTokens = &limit
	}
	for _, s := range req.Stop {
		if s != "" {
			ic.StopSequences = append(ic.StopSequences, s)
		}
	}
	if ic.MaxTokens != nil || ic.Temperature != nil || ic.TopP != nil || len(ic.StopSequences) > 0 {
		out.InferenceConfig = &ic
	}
	if req.TopK != nil {
		out.AdditionalModelRequestFields = map[string]any{"top_k": *req.TopK}
	}
	return out, nil
}

// bedrockCheckResponseFormat refuses JSON modes: Converse has none.
func bedrockCheckResponseFormat(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var rf struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return Invalid("response_format", "response_format must be an object with a type: %v", err)
	}
	switch rf.Type {
	case "", "text":
		return nil
	default:
		e := Unsupported("response_format", bedrockName)
		e.Message += " Bedrock Converse has no JSON output mode (response_format " + rf.Type + ")."
		return e
	}
}

// bedrockToolConfig builds toolConfig, or nil when no tools are to be
// sent (none defined, or tool_choice "none").
func bedrockToolConfig(req *ChatRequest, cache bool) (*brToolConfig, error) {
	choice := req.ToolChoice
	if len(req.Tools) == 0 {
		if choice != nil && (choice.Function != "" || choice.Mode == "required") {
			return nil, Invalid("tool_choice", "tool_choice %q needs tools, and the request defines none.", bedrockChoiceName(choice))
		}
		return nil, nil
	}
	if choice != nil && choice.Function == "" && choice.Mode == "none" {
		return nil, nil
	}
	tc := &brToolConfig{Tools: make([]brTool, 0, len(req.Tools))}
	names := make(map[string]bool, len(req.Tools))
	for i, t := range req.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, Unsupported(fmt.Sprintf("tools[%d].type", i), bedrockName)
		}
		if t.Function.Name == "" {
			return nil, Invalid(fmt.Sprintf("tools[%d].function.name", i), "Every tool needs a function name.")
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !json.Valid(schema) {
			return nil, Invalid(fmt.Sprintf("tools[%d].function.parameters", i), "The parameters of tool %q are not valid JSON.", t.Function.Name)
		}
		names[t.Function.Name] = true
		tc.Tools = append(tc.Tools, brTool{ToolSpec: &brToolSpec{
			Name:        t.Function.Name,
			Description: t.Function.Description,
			InputSchema: brInputSchema{JSON: schema},
		}})
		if cache && cacheControlOf(t.CacheControl) != nil {
			tc.Tools = append(tc.Tools, brTool{CachePoint: brDefaultCachePoint})
		}
	}
	switch {
	case choice == nil:
		// Leave the model's default (auto); not every Bedrock model
		// accepts an explicit toolChoice.
	case choice.Function != "":
		if !names[choice.Function] {
			return nil, Invalid("tool_choice", "tool_choice names the function %q, which is not among the tools.", choice.Function)
		}
		tc.ToolChoice = &brToolChoice{Tool: &brToolName{Name: choice.Function}}
	case choice.Mode == "auto" || choice.Mode == "":
		tc.ToolChoice = &brToolChoice{Auto: &struct{}{}}
	case choice.Mode == "required":
		tc.ToolChoice = &brToolChoice{Any: &struct{}{}}
	default:
		return nil, Invalid("tool_choice", "Unknown tool_choice %q.", choice.Mode)
	}
	return tc, nil
}

func bedrockChoiceName(c *ToolChoice) string {
	if c.Function != "" {
		return c.Function
	}
	return c.Mode
}

// bedrockMessageBuilder accumulates Converse messages, merging
// consecutive messages of the same role.
type bedrockMessageBuilder struct {
	flattenTools bool // write tool calls and results as text (no toolConfig)
	cache        bool // write breakpoints as cachePoint blocks
	msgs         []brMessage
	system       []brSystemBlock
}

// cachePoint appends a cachePoint to blocks when cc is a breakpoint and
// there is content before it to cache.
func (b *bedrockMessageBuilder) cachePoint(blocks []brBlock, cc json.RawMessage) []brBlock {
	if !b.cache || cacheControlOf(cc) == nil || len(blocks) == 0 || blocks[len(blocks)-1].CachePoint != nil {
		return blocks
	}
	return append(blocks, brBlock{CachePoint: brDefaultCachePoint})
}

// systemCachePoint is cachePoint for the system blocks.
func (b *bedrockMessageBuilder) systemCachePoint(cc json.RawMessage) {
	if !b.cache || cacheControlOf(cc) == nil || len(b.system) == 0 || b.system[len(b.system)-1].CachePoint != nil {
		return
	}
	b.system = append(b.system, brSystemBlock{CachePoint: brDefaultCachePoint})
}

func (b *bedrockMessageBuilder) push(role string, blocks []brBlock) {
	if len(blocks) == 0 {
		return
	}
	if n := len(b.msgs); n > 0 && b.msgs[n-1].Role == role {
		b.msgs[n-1].Content = append(b.msgs[n-1].Content, blocks...)
		return
	}
	b.msgs = append(b.msgs, brMessage{Role: role, Content: blocks})
}

func (b *bedrockMessageBuilder) add(m *Message, i int) error {
	param := fmt.Sprintf("messages[%d].content", i)
	switch m.Role {
	case "system", "developer":
		if !m.Content.IsParts {
			if m.Content.Text != "" {
				b.system = append(b.system, brSystemBlock{Text: m.Content.Text})
			}
			b.systemCachePoint(m.CacheControl)
			return nil
		}
		for j, p := range m.Content.Parts {
			if p.Type != "text" {
				return Unsupported(fmt.Sprintf("%s[%d].%s", param, j, bedrockPartField(p.Type)), bedrockName)
			}
			if p.Text != "" {
				b.system = append(b.system, brSystemBlock{Text: p.Text})
			}
			b.systemCachePoint(p.CacheControl)
		}
		b.systemCachePoint(m.CacheControl)
		return nil

	case "user":
		blocks, err := b.userBlocks(m.Content, param)
		if err != nil {
			return err
		}
		b.push("user", b.cachePoint(blocks, m.CacheControl))
		return nil

	case "assistant":
		var blocks []brBlock
		if !m.Content.IsParts {
			blocks = bedrockAppendText(blocks, m.Content.Text)
		} else {
			for j, p := range m.Content.Parts {
				switch p.Type {
				case "text":
					blocks = b.cachePoint(bedrockAppendText(blocks, p.Text), p.CacheControl)
				case "refusal":
					// An assistant refusal part carries no text the
					// canonical Part keeps; Refusal below covers it.
				default:
					return Unsupported(fmt.Sprintf("%s[%d].%s", param, j, bedrockPartField(p.Type)), bedrockName)
				}
			}
		}
		if len(blocks) == 0 && m.Refusal != "" {
			blocks = bedrockAppendText(blocks, m.Refusal)
		}
		for j, tc := range m.ToolCalls {
			tparam := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
			if tc.Function.Name == "" {
				return Invalid(tparam+".function.name", "A tool call needs a function name.")
			}
			if tc.ID == "" {
				return Invalid(tparam+".id", "A tool call needs an id.")
			}
			args := strings.TrimSpace(tc.Function.Arguments)
			if args == "" {
				args = "{}"
			}
			if !json.Valid([]byte(args)) {
				return Invalid(tparam+".function.arguments", "The arguments of tool call %q are not valid JSON.", tc.ID)
			}
			if b.flattenTools {
				blocks = bedrockAppendText(blocks, "[Tool call "+tc.Function.Name+" ("+tc.ID+") with arguments "+args+"]")
				continue
			}
			blocks = append(blocks, brBlock{ToolUse: &brToolUse{ToolUseID: bedrockToolID(tc.ID), Name: tc.Function.Name, Input: json.RawMessage(args)}})
		}
		b.push("assistant", b.cachePoint(blocks, m.CacheControl))
		return nil

	case "tool":
		if m.ToolCallID == "" {
			return Invalid(fmt.Sprintf("messages[%d].tool_call_id", i), "A tool message needs the tool_call_id it answers.")
		}
		content, err := bedrockToolResultContent(m.Content, param)
		if err != nil {
			return err
		}
		if b.flattenTools {
			blocks := []brBlock{}
			text := "[Tool result for " + m.ToolCallID + "]"
			for _, c := range content {
				switch {
				case c.Text != nil:
					text += "\n" + *c.Text
				case c.JSON != nil:
					text += "\n" + string(c.JSON)
				}
			}
			blocks = bedrockAppendText(blocks, text)
			for _, c := range content {
				if c.Image != nil {
					blocks = append(blocks, brBlock{Image: c.Image})
				}
			}
			b.push("user", b.cachePoint(blocks, toolCacheControl(m)))
			return nil
		}
		b.push("user", b.cachePoint([]brBlock{{ToolResult: &brToolResult{ToolUseID: bedrockToolID(m.ToolCallID), Content: content}}}, toolCacheControl(m)))
		return nil

	default:
		return Invalid(fmt.Sprintf("messages[%d].role", i), "Unknown message role %q.", m.Role)
	}
}

// bedrockPartField names the field of a content part for a refusal.
func bedrockPartField(typ string) string {
	switch typ {
	case "image_url", "input_audio", "file":
		return typ
	}
	return "type"
}

func bedrockAppendText(blocks []brBlock, s string) []brBlock {
	if strings.TrimSpace(s) == "" {
		return blocks // Converse refuses blank text blocks
	}
	return append(blocks, brBlock{Text: &s})
}

// toolCacheControl is a tool message's breakpoint: its own, or one on any
// of its parts (a tool result is one block in Converse).
func toolCacheControl(m *Message) json.RawMessage {
	cc := cacheControlOf(m.CacheControl)
	for _, p := range m.Content.Parts {
		if c := cacheControlOf(p.CacheControl); c != nil {
			cc = c
		}
	}
	return cc
}

// userBlocks maps user content to text and image blocks, with a cachePoint
// after each part that is a breakpoint.
func (b *bedrockMessageBuilder) userBlocks(c Content, param string) ([]brBlock, error) {
	if !c.IsParts {
		return bedrockAppendText(nil, c.Text), nil
	}
	var blocks []brBlock
	for j, p := range c.Parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		switch p.Type {
		case "text":
			blocks = b.cachePoint(bedrockAppendText(blocks, p.Text), p.CacheControl)
		case "image_url":
			img, err := bedrockImage(p.ImageURL, pp+".image_url")
			if err != nil {
				return nil, err
			}
			blocks = b.cachePoint(append(blocks, brBlock{Image: img}), p.CacheControl)
		case "input_audio", "file":
			return nil, Unsupported(pp+"."+p.Type, bedrockName)
		default:
			return nil, Invalid(pp+".type", "Unknown content part type %q.", p.Type)
		}
	}
	return blocks, nil
}

// bedrockToolResultContent maps a tool message's content to tool result
// blocks: a JSON object becomes {json}, other text {text}, images
// {image}.
func bedrockToolResultContent(c Content, param string) ([]brToolResultBlock, error) {
	if !c.IsParts {
		return []brToolResultBlock{bedrockToolResultText(c.Text)}, nil
	}
	var out []brToolResultBlock
	for j, p := range c.Parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		switch p.Type {
		case "text":
			out = append(out, bedrockToolResultText(p.Text))
		case "image_url":
			img, err := bedrockImage(p.ImageURL, pp+".image_url")
			if err != nil {
				return nil, err
			}
			out = append(out, brToolResultBlock{Image: img})
		case "input_audio", "file":
			return nil, Unsupported(pp+"."+p.Type, bedrockName)
		default:
			return nil, Invalid(pp+".type", "Unknown content part type %q.", p.Type)
		}
	}
	if len(out) == 0 {
		out = append(out, bedrockToolResultText(""))
	}
	return out, nil
}

func bedrockToolResultText(s string) brToolResultBlock {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return brToolResultBlock{JSON: json.RawMessage(t)}
	}
	if t == "" {
		// Converse refuses blank text, and a tool that printed nothing is
		// routine in agent loops.
		s = "(no output)"
	}
	return brToolResultBlock{Text: &s}
}

// bedrockContinue is the user turn put before a conversation that starts
// with the assistant.
var bedrockContinue = "(continue)"

// bedrockToolID makes a tool call id fit Converse's [a-zA-Z0-9_-]{1,64}:
// other characters become '_', and a longer id is cut and given a hash of
// the whole, so that a call and its result still match.
func bedrockToolID(id string) string {
	ok := len(id) > 0 && len(id) <= 64
	for i := 0; ok && i < len(id); i++ {
		ok = anthropicIDByte(id[i])
	}
	if ok {
		return id
	}
	b := []byte(id)
	for i, c := range b {
		if !anthropicIDByte(c) {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		sum := sha256.Sum256([]byte(id))
		b = append(b[:47], '_')
		b = append(b, hex.EncodeToString(sum[:8])...)
	}
	return string(b)
}

// bedrockImage turns a base64 data: URL into an image block. Converse
// takes image bytes only, so http(s) URLs are refused.
func bedrockImage(iu *ImageURL, param string) (*brImage, error) {
	if iu == nil || iu.URL == "" {
		return nil, Invalid(param, "An image_url part needs a url.")
	}
	u := iu.URL
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		if lower := strings.ToLower(u); strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
			e := Unsupported(param, bedrockName)
			e.Message += " Bedrock takes image bytes, not URLs: send the image as a base64 data: URL."
			return nil, e
		}
		return nil, Invalid(param, "The image url must be a base64 data: URL.")
	}
	meta, data, ok := strings.Cut(u[5:], ",")
	if !ok {
		return nil, Invalid(param, "The image data: URL has no data.")
	}
	params := strings.Split(meta, ";")
	isBase64 := false
	for _, p := range params[1:] {
		if strings.EqualFold(strings.TrimSpace(p), "base64") {
			isBase64 = true
		}
	}
	if !isBase64 {
		return nil, Invalid(param, "The image data: URL must be base64-encoded.")
	}
	var format string
	switch strings.ToLower(strings.TrimSpace(params[0])) {
	case "image/png":
		format = "png"
	case "image/jpeg", "image/jpg":
		format = "jpeg"
	case "image/gif":
		format = "gif"
	case "image/webp":
		format = "webp"
	default:
		e := Unsupported(param, bedrockName)
		e.Message += fmt.Sprintf(" Bedrock accepts png, jpeg, gif and webp images, not %q.", params[0])
		return nil, e
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, Invalid(param, "The image data: URL is not valid base64: %v", err)
	}
	if strings.ContainsAny(data, "\r\n") {
		data = base64.StdEncoding.EncodeToString(raw)
	}
	return &brImage{Format: format, Source: brImageSource{Bytes: data}}, nil
}

// ---- response ----

// ParseResponse decodes a Converse answer.
func (bedrockProvider) ParseResponse(body []byte, model string) (*ChatResponse, error) {
	var r brResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, BadResponse(bedrockName, "invalid JSON: %v", err)
	}
	if r.Output == nil || r.Output.Message == nil {
		return nil, BadResponse(bedrockName, "the answer has no output message")
	}
	msg := Message{Role: "assistant"}
	var text strings.Builder
	for i, blk := range r.Output.Message.Content {
		switch {
		case blk.Text != nil:
			text.WriteString(*blk.Text)
		case blk.ToolUse != nil:
			tu := blk.ToolUse
			if tu.ToolUseID == "" || tu.Name == "" {
				return nil, BadResponse(bedrockName, "toolUse block %d has no toolUseId or name", i)
			}
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{
				ID:       tu.ToolUseID,
				Type:     "function",
				Function: FunctionCall{Name: tu.Name, Arguments: bedrockArguments(tu.Input)},
			})
		}
	}
	if text.Len() == 0 && len(msg.ToolCalls) > 0 {
		msg.Content = Content{Null: true}
	} else {
		msg.Content = TextContent(text.String())
	}
	resp := &ChatResponse{
		ID:      bedrockNewID(),
		Object:  "chat.completion",
		Created: bedrockNow().Unix(),
		Model:   model,
		Choices: []Choice{{Index: 0, Message: msg, FinishReason: bedrockFinish(r.StopReason)}},
	}
	if r.Usage != nil {
		resp.Usage = r.Usage.canonical()
	}
	return resp, nil
}

// bedrockArguments renders a toolUse input as OpenAI's arguments string.
func bedrockArguments(in json.RawMessage) string {
	if len(in) == 0 || string(in) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, in); err != nil {
		return string(in)
	}
	return b.String()
}

func (u *brUsage) canonical() *Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
	out := &Usage{
		PromptTokens:        prompt,
		CompletionTokens:    u.OutputTokens,
		TotalTokens:         prompt + u.OutputTokens,
		CacheCreationTokens: u.CacheWriteInputTokens,
	}
	if u.CacheReadInputTokens > 0 {
		out.PromptTokensDetails = &TokenDetails{CachedTokens: u.CacheReadInputTokens}
	}
	return out
}

// bedrockFinish maps a Converse stopReason to a canonical finish reason.
// Unknown reasons (malformed_model_output, ...) read as "stop".
func bedrockFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return FinishLength
	case "tool_use":
		return FinishToolCalls
	case "guardrail_intervened", "content_filtered":
		return FinishContentFilter
	default:
		return FinishStop
	}
}

// bedrockNewID returns a completion id; Bedrock answers without one.
func bedrockNewID() string {
	return "chatcmpl-br-" + rand.Text()
}

// ---- errors ----

// ParseError classifies a non-2xx Bedrock answer from its
// x-amzn-ErrorType header (or the body's __type) and message.
func (bedrockProvider) ParseError(status int, header http.Header, body []byte) *Error {
	var eb struct {
		Message string `json:"message"` // also matches "Message"
		Type    string `json:"__type"`
	}
	_ = json.Unmarshal(body, &eb)
	typ := bedrockErrorType(header.Get("X-Amzn-ErrorType"))
	if typ == "" {
		typ = bedrockErrorType(eb.Type)
	}
	msg := strings.TrimSpace(eb.Message)
	if msg == "" {
		msg = bedrockSnippet(body)
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return bedrockClassify(typ, status, msg)
}

// bedrockErrorType extracts the bare exception name from
// "ThrottlingException:http://internal.amazon.com/..." or
// "com.amazon.coral.validate#ValidationException".
func bedrockErrorType(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// bedrockSnippet returns up to 200 bytes of a non-JSON error body.
func bedrockSnippet(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// bedrockClassify turns an exception name (any case; "" when unknown),
// an HTTP status (0 inside a stream) and a message into an *Error.
func bedrockClassify(typ string, status int, msg string) *Error {
	label := typ
	if label == "" {
		if status > 0 {
			label = fmt.Sprintf("HTTP %d", status)
		} else {
			label = "error"
		}
	} else if c := label[0]; 'a' <= c && c <= 'z' {
		// Stream exceptions are named in lower camel case
		// (throttlingException); show them as the HTTP API does.
		label = string(c-'a'+'A') + label[1:]
	}
	text := "Bedrock " + label + ": " + msg

	var kind ErrorKind
	switch strings.ToLower(typ) {
	case "throttlingexception", "toomanyrequestsexception":
		kind = KindRateLimited
	case "servicequotaexceededexception":
		kind = KindQuotaExhausted
	case "validationexception":
		kind = KindInvalidRequest
		if bedrockContextOverflow(msg) {
			kind = KindContextOverflow
		}
	case "accessdeniedexception", "unrecognizedclientexception", "invalidsignatureexception",
		"incompletesignatureexception", "expiredtokenexception", "missingauthenticationtokenexception",
		"invalidclienttokenid", "signaturedoesnotmatch":
		kind = KindAuth
	case "resourcenotfoundexception":
		kind = KindNotFound
	case "modelnotreadyexception", "serviceunavailableexception", "internalserverexception",
		"modelstreamerrorexception", "internalfailure", "serviceunavailable":
		kind = KindOverloaded
	case "modeltimeoutexception":
		kind = KindTimeout
	case "modelerrorexception":
		kind = KindOther
	default:
		kind = bedrockKindForStatus(status, msg)
	}
	return bedrockError(kind, text)
}

func bedrockKindForStatus(status int, msg string) ErrorKind {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindAuth
	case status == http.StatusNotFound:
		return KindNotFound
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return KindTimeout
	case status == http.StatusTooManyRequests:
		return KindRateLimited
	case status >= 500:
		return KindOverloaded
	case status >= 400:
		if bedrockContextOverflow(msg) {
			return KindContextOverflow
		}
		return KindInvalidRequest
	default:
		return KindOther
	}
}

// bedrockContextOverflow recognises the ValidationException messages
// Bedrock models give for a prompt longer than their context window.
func bedrockContextOverflow(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{
		"too long", "too many input tokens", "input tokens exceed", "context length",
		"context window", "context_length", "context limit", "maximum context",
	} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// bedrockError builds the client-facing error of a kind.
func bedrockError(kind ErrorKind, msg string) *Error {
	e := &Error{Kind: kind, Message: msg}
	switch kind {
	case KindRateLimited:
		e.Status, e.Type, e.Code = http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded"
	case KindQuotaExhausted:
		e.Status, e.Type, e.Code = http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota"
	case KindContextOverflow:
		e.Status, e.Type, e.Code = http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"
	case KindInvalidRequest:
		e.Status, e.Type, e.Code = http.StatusBadRequest, "invalid_request_error", "invalid_request"
	case KindAuth:
		// The gateway's credential is at fault, not the client's.
		e.Status, e.Type, e.Code = http.StatusBadGateway, "upstream_error", "upstream_auth_failed"
	case KindNotFound:
		e.Status, e.Type, e.Code = http.StatusNotFound, "invalid_request_error", "model_not_found"
	case KindOverloaded:
		e.Status, e.Type, e.Code = http.StatusServiceUnavailable, "upstream_error", "upstream_overloaded"
	case KindTimeout:
		e.Status, e.Type, e.Code = http.StatusGatewayTimeout, "timeout_error", "upstream_timeout"
	default:
		e.Status, e.Type, e.Code = http.StatusBadGateway, "upstream_error", "upstream_error"
	}
	return e
}

// ---- stream ----

// NewStreamDecoder reads a ConverseStream answer (event-stream framing).
//
// Chunks: the role first (on messageStart, or before the first delta if
// that never came), text deltas, tool calls (a header chunk with id and
// name on contentBlockStart, then argument pieces; the index counts tool
// calls, not content blocks; a tool call that got no input pieces gets
// "{}"), the finish reason on messageStop, and a usage chunk with no
// choices on metadata. Exceptions become *Error classified like
// ParseError. A stream that ends before messageStop, or whose framing is
// broken, is a BadResponse.
func (bedrockProvider) NewStreamDecoder(r io.Reader, model string) StreamDecoder {
	return &bedrockStream{
		es:      NewEventStreamReader(r),
		model:   model,
		id:      bedrockNewID(),
		created: bedrockNow().Unix(),
		tools:   make(map[int]*bedrockStreamTool),
	}
}

type bedrockStream struct {
	es      *EventStreamReader
	model   string
	id      string
	created int64

	pending []*Chunk
	started bool // the role chunk went out
	stopped bool // messageStop arrived
	tools   map[int]*bedrockStreamTool
	nTools  int
	err     error // sticky; io.EOF at the end
}

type bedrockStreamTool struct {
	index   int
	hasArgs bool
}

// brStreamEvent is the union of the ConverseStream event payloads.
type brStreamEvent struct {
	Role              string `json:"role"`
	ContentBlockIndex *int   `json:"contentBlockIndex"`
	Start             *struct {
		ToolUse *struct {
			ToolUseID string `json:"toolUseId"`
			Name      string `json:"name"`
		} `json:"toolUse"`
	} `json:"start"`
	Delta *struct {
		Text    *string `json:"text"`
		ToolUse *struct {
			Input string `json:"input"`
		} `json:"toolUse"`
		// reasoningContent deltas are not carried.
	} `json:"delta"`
	StopReason string   `json:"stopReason"`
	Usage      *brUsage `json:"usage"`
}

func (s *bedrockStream) Next() (*Chunk, error) {
	for {
		if len(s.pending) > 0 {
			c := s.pending[0]
			s.pending[0] = nil
			s.pending = s.pending[1:]
			return c, nil
		}
		if s.err != nil {
			return nil, s.err
		}
		m, err := s.es.Next()
		switch {
		case err == io.EOF:
			if s.stopped {
				s.err = io.EOF
			} else {
				s.err = BadResponse(bedrockName, "the stream ended before messageStop")
			}
		case err != nil:
			if errors.Is(err, errEventStream) {
				s.err = BadResponse(bedrockName, "%v", err)
			} else {
				s.err = err // an I/O error, e.g. the context was cancelled
			}
		default:
			if herr := s.handle(m); herr != nil {
				s.err = herr
			}
		}
	}
}

func (s *bedrockStream) chunk(d Delta, finish *string) *Chunk {
	return &Chunk{
		ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []ChunkChoice{{Index: 0, Delta: d, FinishReason: finish}},
	}
}

func (s *bedrockStream) emit(c *Chunk) { s.pending = append(s.pending, c) }

// start emits the role chunk once.
func (s *bedrockStream) start() {
	if s.started {
		return
	}
	s.started = true
	empty := ""
	s.emit(s.chunk(Delta{Role: "assistant", Content: &empty}, nil))
}

func (s *bedrockStream) handle(m *EventStreamMessage) error {
	switch m.Headers[":message-type"] {
	case "exception":
		var p struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(m.Payload, &p) != nil || p.Message == "" {
			p.Message = bedrockSnippet(m.Payload)
		}
		return bedrockClassify(m.Headers[":exception-type"], 0, p.Message)
	case "error":
		return bedrockClassify(m.Headers[":error-code"], 0, m.Headers[":error-message"])
	case "event", "":
	default:
		return nil // a message kind this decoder does not know: skip it
	}

	evt := m.Headers[":event-type"]
	var e brStreamEvent
	switch evt {
	case "messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata":
		if err := json.Unmarshal(m.Payload, &e); err != nil {
			return BadResponse(bedrockName, "invalid %s event: %v", evt, err)
		}
	default:
		return nil // unknown events are skipped for forward compatibility
	}
	if s.stopped && evt != "metadata" {
		return nil // nothing but metadata belongs after messageStop
	}

	switch evt {
	case "messageStart":
		s.start()

	case "contentBlockStart":
		if e.Start == nil || e.Start.ToolUse == nil {
			return nil
		}
		if e.ContentBlockIndex == nil {
			return BadResponse(bedrockName, "contentBlockStart without contentBlockIndex")
		}
		tu := e.Start.ToolUse
		if tu.ToolUseID == "" || tu.Name == "" {
			return BadResponse(bedrockName, "toolUse start without toolUseId or name")
		}
		if _, dup := s.tools[*e.ContentBlockIndex]; dup {
			return BadResponse(bedrockName, "content block %d started twice", *e.ContentBlockIndex)
		}
		s.start()
		t := &bedrockStreamTool{index: s.nTools}
		s.nTools++
		s.tools[*e.ContentBlockIndex] = t
		idx := t.index
		s.emit(s.chunk(Delta{ToolCalls: []ToolCall{{
			Index: &idx, ID: tu.ToolUseID, Type: "function",
			Function: FunctionCall{Name: tu.Name, Arguments: ""},
		}}}, nil))

	case "contentBlockDelta":
		if e.Delta == nil {
			return nil
		}
		if e.Delta.Text != nil && *e.Delta.Text != "" {
			s.start()
			text := *e.Delta.Text
			s.emit(s.chunk(Delta{Content: &text}, nil))
		}
		if e.Delta.ToolUse != nil {
			if e.ContentBlockIndex == nil {
				return BadResponse(bedrockName, "toolUse delta without contentBlockIndex")
			}
			t := s.tools[*e.ContentBlockIndex]
			if t == nil {
				return BadResponse(bedrockName, "toolUse delta for content block %d, which did not start a tool use", *e.ContentBlockIndex)
			}
			if e.Delta.ToolUse.Input != "" {
				t.hasArgs = true
				idx := t.index
				s.emit(s.chunk(Delta{ToolCalls: []ToolCall{{
					Index: &idx, Function: FunctionCall{Arguments: e.Delta.ToolUse.Input},
				}}}, nil))
			}
		}

	case "contentBlockStop":
		if e.ContentBlockIndex == nil {
			return nil
		}
		if t := s.tools[*e.ContentBlockIndex]; t != nil && !t.hasArgs {
			// A tool called without input: give clients valid JSON.
			t.hasArgs = true
			idx := t.index
			s.emit(s.chunk(Delta{ToolCalls: []ToolCall{{
				Index: &idx, Function: FunctionCall{Arguments: "{}"},
			}}}, nil))
		}

	case "messageStop":
		s.start()
		s.stopped = true
		finish := bedrockFinish(e.StopReason)
		s.emit(s.chunk(Delta{}, &finish))

	case "metadata":
		if e.Usage != nil {
			s.emit(&Chunk{
				ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
				Choices: []ChunkChoice{}, Usage: e.Usage.canonical(),
			})
		}
	}
	return nil
}
