package translate

// The Bedrock request encoder: a canonical request as a signed Converse
// request (the rule is in the comment on Bedrock).

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

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

// add appends one canonical message: system text to the system blocks,
// the others to the alternating user and assistant messages.
func (b *bedrockMessageBuilder) add(m *Message, i int) error {
	param := fmt.Sprintf("messages[%d].content", i)
	switch m.Role {
	case "system", "developer":
		return b.addSystem(m, param)
	case "user":
		blocks, err := b.userBlocks(m.Content, param)
		if err != nil {
			return err
		}
		b.push("user", b.cachePoint(blocks, m.CacheControl))
		return nil
	case "assistant":
		return b.addAssistant(m, i, param)
	case "tool":
		return b.addToolResult(m, i, param)
	default:
		return Invalid(fmt.Sprintf("messages[%d].role", i), "Unknown message role %q.", m.Role)
	}
}

// addSystem appends a system or developer message's text to the system
// blocks.
func (b *bedrockMessageBuilder) addSystem(m *Message, param string) error {
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
}

// addAssistant appends an assistant message: its text, then its tool
// calls as toolUse blocks (or as text when tools are flattened).
func (b *bedrockMessageBuilder) addAssistant(m *Message, i int, param string) error {
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
		var err error
		if blocks, err = b.toolCall(blocks, tc, fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)); err != nil {
			return err
		}
	}
	b.push("assistant", b.cachePoint(blocks, m.CacheControl))
	return nil
}

// toolCall appends one tool call of an assistant message to blocks.
func (b *bedrockMessageBuilder) toolCall(blocks []brBlock, tc ToolCall, tparam string) ([]brBlock, error) {
	if tc.Function.Name == "" {
		return nil, Invalid(tparam+".function.name", "A tool call needs a function name.")
	}
	if tc.ID == "" {
		return nil, Invalid(tparam+".id", "A tool call needs an id.")
	}
	args := strings.TrimSpace(tc.Function.Arguments)
	if args == "" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) {
		return nil, Invalid(tparam+".function.arguments", "The arguments of tool call %q are not valid JSON.", tc.ID)
	}
	if b.flattenTools {
		return bedrockAppendText(blocks, "[Tool call "+tc.Function.Name+" ("+tc.ID+") with arguments "+args+"]"), nil
	}
	return append(blocks, brBlock{ToolUse: &brToolUse{ToolUseID: bedrockToolID(tc.ID), Name: tc.Function.Name, Input: json.RawMessage(args)}}), nil
}

// addToolResult appends a tool message as a toolResult block of a user
// message (or as text when tools are flattened).
func (b *bedrockMessageBuilder) addToolResult(m *Message, i int, param string) error {
	if m.ToolCallID == "" {
		return Invalid(fmt.Sprintf("messages[%d].tool_call_id", i), "A tool message needs the tool_call_id it answers.")
	}
	content, err := bedrockToolResultContent(m.Content, param)
	if err != nil {
		return err
	}
	if !b.flattenTools {
		b.push("user", b.cachePoint([]brBlock{{ToolResult: &brToolResult{ToolUseID: bedrockToolID(m.ToolCallID), Content: content}}}, toolCacheControl(m)))
		return nil
	}
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
