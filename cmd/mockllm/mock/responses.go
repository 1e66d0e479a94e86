package mock

// The OpenAI Responses API (POST /v1/responses, and Azure's
// /openai/v1/responses and /openai/responses): the request is read into a
// turn like every chat format's (input items: messages, function_call and
// function_call_output; function tools, also inside namespace tools;
// tool_choice; max_output_tokens; instructions as the system prompt) and
// answered with a Response object, or streamed with the API's event
// sequence: response.created, response.in_progress, then per output item
// output_item.added, its content_part.added / output_text.delta ... /
// output_text.done / content_part.done (a message) or
// function_call_arguments.delta ... / .done (a call), output_item.done,
// and last response.completed (response.incomplete when the output limit
// cut the text), which carries the usage. A call to a function of a
// namespace tool names its namespace, as the API does.

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// azureQueryError returns the error of an Azure path without the
// api-version its API needs ("" when it is fine): the deployment paths and
// /openai/responses need one; the v1 paths do not.
func azureQueryError(r *http.Request, deployment string) string {
	if (deployment != "" || r.URL.Path == "/openai/responses") && r.URL.Query().Get("api-version") == "" {
		return "Resource not found: the api-version query parameter is required on " + r.URL.Path
	}
	return ""
}

// respRequest is what the mock reads of a create-response request.
type respRequest struct {
	Input           json.RawMessage   `json:"input"`
	Instructions    string            `json:"instructions"`
	Tools           []json.RawMessage `json:"tools"`
	ToolChoice      json.RawMessage   `json:"tool_choice"`
	MaxOutputTokens int               `json:"max_output_tokens"`
	Stream          bool              `json:"stream"`
}

// respTool is a tools entry: a function, or a namespace of functions.
type respTool struct {
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	Parameters json.RawMessage   `json:"parameters"`
	Tools      []json.RawMessage `json:"tools"`
}

// responsesTurn decodes a Responses request into a turn; namespaces maps a
// tool's name to the namespace it was declared in.
func responsesTurn(body []byte) (*turn, *respRequest, map[string]string, error) {
	var req respRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, nil, err
	}
	t := &turn{maxTokens: req.MaxOutputTokens, systemBytes: len(req.Instructions)}
	t.promptChars = len(req.Instructions)
	if len(req.Input) > 0 && req.Input[0] == '"' {
		var s string
		_ = json.Unmarshal(req.Input, &s)
		t.promptChars += len(s)
	} else {
		var items []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(req.Input, &items); err != nil {
			return nil, nil, nil, err
		}
		for i, it := range items {
			text, images := respContent(it.Content)
			if it.Type == "function_call_output" {
				text, _ = respContent(it.Output)
			}
			t.promptChars += len(text)
			t.images += images
			if it.Role == "system" || it.Role == "developer" {
				t.systemBytes += len(text)
			}
			if i == len(items)-1 && it.Type == "function_call_output" {
				t.hasResult, t.result = true, text
			}
		}
	}
	namespaces := map[string]string{}
	for _, raw := range req.Tools {
		var tl respTool
		if json.Unmarshal(raw, &tl) != nil {
			continue
		}
		switch tl.Type {
		case "function":
			t.tools = append(t.tools, tool{tl.Name, tl.Parameters})
		case "namespace":
			for _, inner := range tl.Tools {
				var f respTool
				if json.Unmarshal(inner, &f) == nil && f.Type == "function" {
					t.tools = append(t.tools, tool{f.Name, f.Parameters})
					namespaces[f.Name] = tl.Name
				}
			}
		}
	}
	var choice struct {
		Type, Name string
	}
	switch tc := string(req.ToolChoice); {
	case tc == `"none"`:
		t.choice = choiceNone
	case json.Unmarshal(req.ToolChoice, &choice) == nil && choice.Type == "function":
		t.choice = choice.Name
	}
	return t, &req, namespaces, nil
}

// respContent returns the text of a message's content or a call's output
// (a string or parts) and its number of input_image parts.
func respContent(raw json.RawMessage) (string, int) {
	if len(raw) == 0 || raw[0] != '[' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, 0
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var text strings.Builder
	images := 0
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			text.WriteString(p.Text)
		case "input_image":
			images++
		}
	}
	return text.String(), images
}

// respItem is an output item: a message or a function call.
type respItem struct {
	ID        string        `json:"id"`
	Type      string        `json:"type"`
	Status    string        `json:"status"`
	Role      string        `json:"role,omitempty"`
	Content   *[]respOutput `json:"content,omitempty"`
	Arguments *string       `json:"arguments,omitempty"`
	CallID    string        `json:"call_id,omitempty"`
	Name      string        `json:"name,omitempty"`
	Namespace string        `json:"namespace,omitempty"`
}

type respOutput struct {
	Type        string `json:"type"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
	Text        string `json:"text"`
}

type respUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// respObject is a Response object.
type respObject struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	CreatedAt         int64             `json:"created_at"`
	Status            string            `json:"status"`
	Background        bool              `json:"background"`
	Error             any               `json:"error"`
	IncompleteDetails map[string]string `json:"incomplete_details"`
	Instructions      *string           `json:"instructions"`
	MaxOutputTokens   *int              `json:"max_output_tokens"`
	Model             string            `json:"model"`
	Output            []respItem        `json:"output"`
	ParallelToolCalls bool              `json:"parallel_tool_calls"`
	Store             bool              `json:"store"`
	Temperature       float64           `json:"temperature"`
	Text              any               `json:"text"`
	ToolChoice        string            `json:"tool_choice"`
	Tools             []any             `json:"tools"`
	TopP              float64           `json:"top_p"`
	Truncation        string            `json:"truncation"`
	Usage             *respUsage        `json:"usage"`
	Metadata          map[string]string `json:"metadata"`
}

// responses answers a Responses request.
func (s *Server) responses(w http.ResponseWriter, r *http.Request, body []byte, model string, p *params) {
	t, req, namespaces, err := responsesTurn(body)
	if err != nil {
		s.writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error(), "")
		return
	}
	if len(req.Input) == 0 {
		s.writeError(w, http.StatusBadRequest, "Missing required parameter: 'input'.", "missing_required_parameter")
		return
	}
	rp := t.plan(p, req.Stream)
	id := strconv.FormatInt(s.seq.Add(1), 10)
	obj := &respObject{ID: "resp_mock_" + id, Object: "response", CreatedAt: time.Now().Unix(), Status: "completed",
		Model: model, Output: []respItem{}, ParallelToolCalls: true, Temperature: 1, TopP: 1, Truncation: "disabled",
		Text: map[string]any{"format": map[string]string{"type": "text"}}, ToolChoice: "auto", Tools: []any{}, Metadata: map[string]string{}}
	if req.Instructions != "" {
		obj.Instructions = &req.Instructions
	}
	if req.MaxOutputTokens > 0 {
		obj.MaxOutputTokens = &req.MaxOutputTokens
	}
	usage := &respUsage{InputTokens: rp.prompt, InputTokensDetails: map[string]int{"cached_tokens": rp.cached},
		OutputTokens: rp.output, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}, TotalTokens: rp.prompt + rp.output}
	if rp.stop == stopMax {
		obj.Status, obj.IncompleteDetails = "incomplete", map[string]string{"reason": "max_output_tokens"}
	}
	msgID, callID := "msg_mock_"+id, "fc_mock_"+id
	if req.Stream {
		s.finish(s.streamResponse(w, r, p, obj, usage, &rp, msgID, callID, namespaces))
		return
	}
	if rp.tool == nil || rp.text != "" {
		obj.Output = append(obj.Output, respMessage(msgID, "completed", rp.text))
	}
	if rp.tool != nil {
		obj.Output = append(obj.Output, respCall(callID, "completed", string(rp.args), rp.tool.name, namespaces))
	}
	if rp.stop == stopMax {
		obj.Output[0].Status = "incomplete"
	}
	obj.Usage = usage
	b, err := json.Marshal(obj)
	if err != nil {
		s.writeError(w, http.StatusInternalServerError, err.Error(), "")
		return
	}
	s.finish(s.writeBody(w, http.StatusOK, b, p.fault == faultMidStream))
}

func respMessage(id, status, text string) respItem {
	return respItem{ID: id, Type: "message", Status: status, Role: "assistant",
		Content: &[]respOutput{{Type: "output_text", Annotations: []any{}, Logprobs: []any{}, Text: text}}}
}

func respCall(id, status, args, name string, namespaces map[string]string) respItem {
	return respItem{ID: id, Type: "function_call", Status: status, Arguments: &args, CallID: "call_mock_1",
		Name: name, Namespace: namespaces[name]}
}

// respEmitter writes the events of a streamed response, numbering them.
type respEmitter struct {
	st  *streamer
	seq int
}

func (e *respEmitter) emit(typ string, fields map[string]any) error {
	fields["type"] = typ
	fields["sequence_number"] = e.seq
	e.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	return e.st.send([]byte("event: " + typ + "\ndata: " + string(b) + "\n\n"))
}

// streamResponse streams the answer rp with the Responses event sequence.
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, p *params, obj *respObject, usage *respUsage,
	rp *reply, msgID, callID string, namespaces map[string]string) error {
	var off []int
	if rp.tool != nil {
		off = rp.pieces(p.chunks)
	}
	st := s.startStream(w, r.Context(), p, sseType, max(rp.deltas, 0)+max(len(off)-1, 0))
	defer st.end()
	e := &respEmitter{st: st}
	final, status := *obj, obj.Status
	obj.Status = "in_progress"
	obj.IncompleteDetails = nil
	for _, typ := range []string{"response.created", "response.in_progress"} {
		if err := e.emit(typ, map[string]any{"response": obj}); err != nil {
			return err
		}
	}
	if rp.tool == nil || rp.deltas > 0 {
		text, err := s.streamRespText(e, rp, msgID, status)
		if err != nil {
			return err
		}
		final.Output = append(final.Output, respMessage(msgID, itemStatus(status), text))
	}
	if rp.tool != nil {
		idx := len(final.Output)
		if err := e.emit("response.output_item.added", map[string]any{"output_index": idx,
			"item": respCall(callID, "in_progress", "", rp.tool.name, namespaces)}); err != nil {
			return err
		}
		for i := 0; i+1 < len(off); i++ {
			if err := st.delta(); err != nil {
				return err
			}
			if err := e.emit("response.function_call_arguments.delta", map[string]any{"item_id": callID, "output_index": idx,
				"delta": string(rp.args[off[i]:off[i+1]])}); err != nil {
				return err
			}
		}
		args := string(rp.args)
		if err := e.emit("response.function_call_arguments.done", map[string]any{"item_id": callID, "output_index": idx,
			"name": rp.tool.name, "arguments": args}); err != nil {
			return err
		}
		call := respCall(callID, "completed", args, rp.tool.name, namespaces)
		if err := e.emit("response.output_item.done", map[string]any{"output_index": idx, "item": call}); err != nil {
			return err
		}
		final.Output = append(final.Output, call)
	}
	final.Status, final.Usage = status, usage
	last := "response.completed"
	if status == "incomplete" {
		last = "response.incomplete"
	}
	return e.emit(last, map[string]any{"response": &final})
}

func itemStatus(responseStatus string) string {
	if responseStatus == "incomplete" {
		return "incomplete"
	}
	return "completed"
}

// streamRespText streams the message item of rp (output index 0) and
// returns its text.
func (s *Server) streamRespText(e *respEmitter, rp *reply, msgID, status string) (string, error) {
	empty := respOutput{Type: "output_text", Annotations: []any{}, Logprobs: []any{}}
	item := respMessage(msgID, "in_progress", "")
	item.Content = &[]respOutput{}
	if err := e.emit("response.output_item.added", map[string]any{"output_index": 0, "item": item}); err != nil {
		return "", err
	}
	if err := e.emit("response.content_part.added", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
		"part": empty}); err != nil {
		return "", err
	}
	var text strings.Builder
	for i := range rp.deltas {
		if err := e.st.delta(); err != nil {
			return "", err
		}
		d := ""
		if i == 0 {
			d = rp.prefix
		}
		if rp.tool == nil {
			d += streamTokens[i%len(streamTokens)]
		}
		text.WriteString(d)
		if err := e.emit("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
			"delta": d, "logprobs": []any{}}); err != nil {
			return "", err
		}
	}
	done := empty
	done.Text = text.String()
	if err := e.emit("response.output_text.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
		"text": done.Text, "logprobs": []any{}}); err != nil {
		return "", err
	}
	if err := e.emit("response.content_part.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
		"part": done}); err != nil {
		return "", err
	}
	if err := e.emit("response.output_item.done", map[string]any{"output_index": 0,
		"item": respMessage(msgID, itemStatus(status), done.Text)}); err != nil {
		return "", err
	}
	return done.Text, nil
}
