package translate

// The Anthropic stream decoder: a Messages SSE stream as canonical chunks.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// NewStreamDecoder reads a Messages SSE stream.
func (anthropicProvider) NewStreamDecoder(r io.Reader, model string) StreamDecoder {
	return &anthropicStreamDecoder{
		sse:     newAnthropicSSE(r),
		model:   model,
		created: anthropicNow().Unix(),
		blocks:  map[int]anthropicBlockState{},
	}
}

// anthropicBlockState is what the decoder knows of an open content block.
type anthropicBlockState struct {
	kind     string // text, tool_use, or "" for blocks without a canonical form
	toolCall int    // the block's index among the message's tool_use blocks
	hasArgs  bool   // a tool_use block got some of its input
}

// anthropicStreamDecoder turns Anthropic stream events into chunks.
type anthropicStreamDecoder struct {
	sse     *anthropicSSE
	model   string
	created int64

	id       string
	queue    []*Chunk
	err      error // sticky: returned once the queue is drained
	done     bool  // message_stop was read
	roleSent bool

	blocks    map[int]anthropicBlockState
	toolCalls int

	usage    AnthropicStreamUsage
	finished bool // a finish_reason chunk was queued
}

// anthropicEvent is any stream event's data.
type anthropicEvent struct {
	Type         string              `json:"type"`
	Message      *anthropicMessageIn `json:"message"`
	Index        int                 `json:"index"`
	ContentBlock json.RawMessage     `json:"content_block"`
	Delta        json.RawMessage     `json:"delta"` // read according to the event and delta type
}

// Next returns the next chunk, io.EOF after message_stop, an *Error for an
// error event, and a BadResponse for a malformed or truncated stream.
func (d *anthropicStreamDecoder) Next() (*Chunk, error) {
	for {
		if len(d.queue) > 0 {
			c := d.queue[0]
			d.queue[0] = nil
			d.queue = d.queue[1:]
			return c, nil
		}
		if d.err != nil {
			return nil, d.err
		}
		if d.done {
			return nil, io.EOF
		}
		name, data, err := d.sse.next()
		switch {
		case err == io.EOF:
			if d.finished {
				// The stream stopped after message_delta without
				// message_stop: the answer is complete, report it.
				d.stop()
				continue
			}
			d.err = BadResponse(anthropicName, "the stream ended before the message was complete")
		case err != nil:
			var te *Error
			if errors.As(err, &te) {
				d.err = te
			} else {
				d.err = err
			}
		default:
			if herr := d.handle(name, data); herr != nil {
				d.err = herr
			}
		}
	}
}

// handle processes one event, queueing the chunks it yields.
func (d *anthropicStreamDecoder) handle(name string, data []byte) error {
	var ev anthropicEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return BadResponse(anthropicName, "a stream event is not JSON: %v", err)
	}
	typ := ev.Type
	if typ == "" {
		typ = name
	}
	d.usage.Event(typ, data)
	switch typ {
	case "message_start":
		d.messageStart(&ev)
	case "content_block_start":
		return d.blockStart(&ev)
	case "content_block_delta":
		return d.blockDelta(&ev)
	case "content_block_stop":
		d.blockStop(ev.Index)
	case "message_delta":
		return d.messageDelta(&ev)
	case "message_stop":
		d.stop()
	case "error":
		return AnthropicEventError(data)
	}
	// ping and event types added later are ignored, as Anthropic asks.
	return nil
}

// messageStart takes the message id and sends the assistant role.
func (d *anthropicStreamDecoder) messageStart(ev *anthropicEvent) {
	if ev.Message != nil {
		d.id = ev.Message.ID
	}
	if !d.roleSent {
		empty := ""
		d.push(Delta{Content: &empty}, nil)
	}
}

// blockStart opens a content block: text is sent as it comes, a tool_use
// block starts a tool call, other blocks have no canonical form.
func (d *anthropicStreamDecoder) blockStart(ev *anthropicEvent) error {
	if anthropicAbsent(ev.ContentBlock) {
		return BadResponse(anthropicName, "content_block_start without a content_block")
	}
	block, err := anthropicBlock(ev.ContentBlock)
	if err != nil {
		return BadResponse(anthropicName, "content_block_start: %v", err)
	}
	switch block.Type {
	case "text":
		d.blocks[ev.Index] = anthropicBlockState{kind: "text"}
		if t := block.Text; t != "" {
			d.push(Delta{Content: &t}, nil)
		}
	case "tool_use":
		idx := d.toolCalls
		d.toolCalls++
		args := ""
		if in := bytes.TrimSpace(block.Input); len(in) > 0 && !anthropicEmptyObject(in) {
			args = anthropicCompactInput(in) // an upstream that sends the whole input up front
		}
		d.blocks[ev.Index] = anthropicBlockState{kind: "tool_use", toolCall: idx, hasArgs: args != ""}
		d.push(Delta{ToolCalls: []ToolCall{{Index: &idx, ID: block.ID, Type: "function",
			Function: FunctionCall{Name: block.Name, Arguments: args}}}}, nil)
	default: // thinking, server tools: no canonical form
		d.blocks[ev.Index] = anthropicBlockState{}
	}
	return nil
}

// blockDelta sends a text delta as content and an input_json_delta as a
// piece of its tool call's arguments; thinking_delta, signature_delta and
// citations_delta are dropped.
func (d *anthropicStreamDecoder) blockDelta(ev *anthropicEvent) error {
	if anthropicAbsent(ev.Delta) {
		return BadResponse(anthropicName, "content_block_delta without a delta")
	}
	var delta struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(ev.Delta, &delta); err != nil {
		return BadResponse(anthropicName, "content_block_delta: %v", err)
	}
	switch delta.Type {
	case "text_delta":
		var td struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(ev.Delta, &td); err != nil {
			return BadResponse(anthropicName, "text_delta: %v", err)
		}
		if td.Text != "" {
			d.push(Delta{Content: &td.Text}, nil)
		}
	case "input_json_delta":
		var jd struct {
			PartialJSON string `json:"partial_json"`
		}
		if err := json.Unmarshal(ev.Delta, &jd); err != nil {
			return BadResponse(anthropicName, "input_json_delta: %v", err)
		}
		d.toolArguments(ev.Index, jd.PartialJSON)
	}
	return nil
}

// toolArguments sends a piece of the arguments of the tool call that
// content block index is.
func (d *anthropicStreamDecoder) toolArguments(index int, partial string) {
	b, ok := d.blocks[index]
	if ok && b.kind == "tool_use" && partial != "" {
		idx := b.toolCall
		b.hasArgs = true
		d.blocks[index] = b
		d.push(Delta{ToolCalls: []ToolCall{{Index: &idx, Function: FunctionCall{Arguments: partial}}}}, nil)
	}
}

// blockStop closes a content block. A tool called with no arguments
// streams no input at all: its arguments are "{}", as in a whole answer,
// never "".
func (d *anthropicStreamDecoder) blockStop(index int) {
	if b, ok := d.blocks[index]; ok && b.kind == "tool_use" && !b.hasArgs {
		idx := b.toolCall
		b.hasArgs = true
		d.blocks[index] = b
		d.push(Delta{ToolCalls: []ToolCall{{Index: &idx, Function: FunctionCall{Arguments: "{}"}}}}, nil)
	}
}

// messageDelta sends the finish reason (once); the usage it carries was
// read by d.usage.
func (d *anthropicStreamDecoder) messageDelta(ev *anthropicEvent) error {
	var md struct {
		StopReason *string `json:"stop_reason"`
	}
	if !anthropicAbsent(ev.Delta) {
		if err := json.Unmarshal(ev.Delta, &md); err != nil {
			return BadResponse(anthropicName, "message_delta: %v", err)
		}
	}
	if md.StopReason != nil && !d.finished {
		reason := anthropicFinishReason(*md.StopReason)
		d.push(Delta{}, &reason)
		d.finished = true
	}
	return nil
}

// stop ends the message: a finish reason if none came, then the usage.
func (d *anthropicStreamDecoder) stop() {
	if !d.finished {
		reason := FinishStop
		d.push(Delta{}, &reason)
		d.finished = true
	}
	if u := d.usage.Usage(); u != nil {
		d.queue = append(d.queue, &Chunk{ID: d.id, Object: "chat.completion.chunk", Created: d.created, Model: d.model,
			Choices: []ChunkChoice{}, Usage: u})
	}
	d.done = true
}

// push queues a chunk; the first one carries the assistant role.
func (d *anthropicStreamDecoder) push(delta Delta, finish *string) {
	if !d.roleSent {
		delta.Role = "assistant"
		d.roleSent = true
	}
	d.queue = append(d.queue, &Chunk{ID: d.id, Object: "chat.completion.chunk", Created: d.created, Model: d.model,
		Choices: []ChunkChoice{{Index: 0, Delta: delta, FinishReason: finish}}})
}

// anthropicAbsent reports whether a raw field is missing or null.
func anthropicAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// anthropicEmptyObject reports whether raw is {} (with any spacing).
func anthropicEmptyObject(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return false
	}
	return len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
}

// anthropicSSE reads server-sent events: lines end in LF, CRLF or a lone
// CR (a lone CR is only seen once the next LF or the end arrives), lines
// starting with ':' are comments, "data" lines of one event are joined with
// LF, and lines of any length up to anthropicMaxEvent are accepted.
type anthropicSSE struct {
	r     *bufio.Reader
	long  []byte // a line longer than the reader's buffer, being gathered
	seg   []byte // the current LF-terminated segment
	pos   int    // how much of seg has been consumed
	eof   bool
	first bool // no line read yet (a leading BOM is dropped)

	event   string
	data    []byte
	hasData bool
	reset   bool // the last event was handed out: clear before reading on
}

func newAnthropicSSE(r io.Reader) *anthropicSSE {
	return &anthropicSSE{r: bufio.NewReaderSize(r, 8<<10), first: true}
}

// next returns the next event's name and data (valid until the next call),
// or io.EOF at the end of the stream.
func (s *anthropicSSE) next() (string, []byte, error) {
	if s.reset {
		s.event, s.data, s.hasData, s.reset = "", s.data[:0], false, false
	}
	for {
		line, err := s.readLine()
		if err == io.EOF {
			if s.hasData { // the last event lacked its blank line: take it
				s.reset = true
				return s.event, s.data, nil
			}
			return "", nil, io.EOF
		}
		if err != nil {
			return "", nil, err
		}
		if len(line) == 0 {
			if s.hasData {
				s.reset = true
				return s.event, s.data, nil
			}
			s.event = ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			s.event = string(value)
		case "data":
			if s.hasData {
				s.data = append(s.data, '\n')
			}
			if len(s.data)+len(value) > anthropicMaxEvent {
				return "", nil, BadResponse(anthropicName, "a stream event is larger than %d bytes", anthropicMaxEvent)
			}
			s.data = append(s.data, value...)
			s.hasData = true
		}
		// id and retry are irrelevant to a one-shot stream.
	}
}

// readLine returns the next line without its terminator.
func (s *anthropicSSE) readLine() ([]byte, error) {
	for {
		if s.pos < len(s.seg) {
			rest := s.seg[s.pos:]
			i := bytes.IndexAny(rest, "\r\n")
			if i < 0 { // the unterminated end of the stream
				s.pos = len(s.seg)
				return s.trimBOM(rest), nil
			}
			s.pos += i + 1
			if rest[i] == '\r' && i+1 < len(rest) && rest[i+1] == '\n' {
				s.pos++
			}
			return s.trimBOM(rest[:i]), nil
		}
		if s.eof {
			return nil, io.EOF
		}
		if err := s.readSegment(); err != nil {
			return nil, err
		}
	}
}

// readSegment reads up to and including the next LF (or to the end).
func (s *anthropicSSE) readSegment() error {
	s.long = s.long[:0]
	for {
		b, err := s.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(s.long)+len(b) > anthropicMaxEvent {
				return BadResponse(anthropicName, "a stream line is longer than %d bytes", anthropicMaxEvent)
			}
			s.long = append(s.long, b...)
			continue
		}
		if len(s.long) > 0 {
			s.long = append(s.long, b...)
			b = s.long
		}
		s.seg, s.pos = b, 0
		if err == io.EOF {
			s.eof = true
			return nil
		}
		return err
	}
}

func (s *anthropicSSE) trimBOM(line []byte) []byte {
	if s.first {
		s.first = false
		return bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
	}
	return line
}
