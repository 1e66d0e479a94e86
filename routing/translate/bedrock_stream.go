package translate

// The Bedrock stream decoder: a ConverseStream answer (event-stream
// framing) as canonical chunks.

import (
	"encoding/json"
	"errors"
	"io"
)

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
	return s.event(evt, &e)
}

// event handles one decoded event of a known type.
func (s *bedrockStream) event(evt string, e *brStreamEvent) error {
	switch evt {
	case "messageStart":
		s.start()
	case "contentBlockStart":
		return s.blockStart(e)
	case "contentBlockDelta":
		return s.blockDelta(e)
	case "contentBlockStop":
		s.blockStop(e)
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

// blockStart starts a tool call for a toolUse block; text blocks need no
// start.
func (s *bedrockStream) blockStart(e *brStreamEvent) error {
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
	return nil
}

// blockDelta sends a text delta as content and a toolUse delta as a piece
// of its tool call's arguments.
func (s *bedrockStream) blockDelta(e *brStreamEvent) error {
	if e.Delta == nil {
		return nil
	}
	if e.Delta.Text != nil && *e.Delta.Text != "" {
		s.start()
		text := *e.Delta.Text
		s.emit(s.chunk(Delta{Content: &text}, nil))
	}
	if e.Delta.ToolUse == nil {
		return nil
	}
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
	return nil
}

// blockStop ends a content block: a tool called without input gets "{}",
// so that clients see valid JSON.
func (s *bedrockStream) blockStop(e *brStreamEvent) {
	if e.ContentBlockIndex == nil {
		return
	}
	if t := s.tools[*e.ContentBlockIndex]; t != nil && !t.hasArgs {
		t.hasArgs = true
		idx := t.index
		s.emit(s.chunk(Delta{ToolCalls: []ToolCall{{
			Index: &idx, Function: FunctionCall{Arguments: "{}"},
		}}}, nil))
	}
}
