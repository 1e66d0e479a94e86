package translate

import (
	"bytes"
	"encoding/json"
	"io"
)

// NewStreamEncoder writes a canonical stream as Anthropic's SSE events.
func (anthropicInbound) NewStreamEncoder(w io.Writer, model string) StreamEncoder {
	return &anthropicStreamEncoder{w: w, model: model, open: -1, openTool: -1, toolBlocks: map[int]int{}}
}

// anthropicStreamEncoder turns chunks into message_start, content block
// events, message_delta and message_stop. Anthropic's content blocks are
// sequential: a text delta while a tool_use block is open closes it and
// opens a text block, and a tool call with a new index closes the open
// block and opens a tool_use block.
type anthropicStreamEncoder struct {
	w     io.Writer
	model string
	buf   bytes.Buffer

	started bool
	closed  bool

	nextBlock  int         // index of the next content block
	open       int         // index of the open block, or -1
	openTool   int         // the canonical tool-call index of the open tool_use block, or -1
	toolBlocks map[int]int // canonical tool-call index → block index
	// toolIDs is the id first seen at each canonical index; remap sends an
	// index whose id changed (an upstream numbering every call 0) to the
	// latest call's own slot.
	toolIDs map[int]string
	remap   map[int]int

	finish string // the last finish reason seen
	usage  *Usage // the last usage seen
}

type anthropicStreamMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Content      []any          `json:"content"`
	Model        string         `json:"model"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

type anthropicEventMessageStart struct {
	Type    string                 `json:"type"`
	Message anthropicStreamMessage `json:"message"`
}

type anthropicEventBlockStart struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock any    `json:"content_block"`
}

type anthropicEventBlockDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

type anthropicTextDelta struct {
	Type string `json:"type"` // "text_delta"
	Text string `json:"text"`
}

type anthropicJSONDelta struct {
	Type        string `json:"type"` // "input_json_delta"
	PartialJSON string `json:"partial_json"`
}

type anthropicEventBlockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type anthropicEventMessageDelta struct {
	Type  string `json:"type"`
	Delta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage any `json:"usage"`
}

// anthropicOutputUsage is message_delta's usage when only the output is
// known.
type anthropicOutputUsage struct {
	OutputTokens int64 `json:"output_tokens"`
}

// event appends one SSE event to the buffer.
func (e *anthropicStreamEncoder) event(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	e.buf.WriteString("event: ")
	e.buf.WriteString(name)
	e.buf.WriteString("\ndata: ")
	e.buf.Write(b)
	e.buf.WriteString("\n\n")
	return nil
}

// flush writes the buffered events with one Write.
func (e *anthropicStreamEncoder) flush() error {
	if e.buf.Len() == 0 {
		return nil
	}
	_, err := e.w.Write(e.buf.Bytes())
	e.buf.Reset()
	return err
}

func (e *anthropicStreamEncoder) start(c *Chunk) error {
	e.started = true
	id := ""
	if c != nil {
		id = c.ID
	}
	msg := anthropicStreamMessage{ID: anthropicMessageID(id), Type: "message", Role: "assistant",
		Content: []any{}, Model: e.model}
	if c != nil && c.Usage != nil {
		msg.Usage = anthropicUsageOf(c.Usage)
		msg.Usage.OutputTokens = 0
	}
	return e.event("message_start", anthropicEventMessageStart{Type: "message_start", Message: msg})
}

func (e *anthropicStreamEncoder) closeBlock() error {
	if e.open < 0 {
		return nil
	}
	err := e.event("content_block_stop", anthropicEventBlockStop{Type: "content_block_stop", Index: e.open})
	e.open, e.openTool = -1, -1
	return err
}

func (e *anthropicStreamEncoder) text(s string) error {
	if s == "" {
		return nil
	}
	if e.open < 0 || e.openTool >= 0 {
		if err := e.closeBlock(); err != nil {
			return err
		}
		e.open, e.openTool = e.nextBlock, -1
		e.nextBlock++
		if err := e.event("content_block_start", anthropicEventBlockStart{Type: "content_block_start", Index: e.open,
			ContentBlock: anthropicTextBlock{Type: "text", Text: ""}}); err != nil {
			return err
		}
	}
	return e.event("content_block_delta", anthropicEventBlockDelta{Type: "content_block_delta", Index: e.open,
		Delta: anthropicTextDelta{Type: "text_delta", Text: s}})
}

func (e *anthropicStreamEncoder) toolCall(tc ToolCall) error {
	var idx int
	switch {
	case tc.Index != nil:
		idx = *tc.Index
		if tc.ID != "" {
			if e.toolIDs == nil {
				e.toolIDs = map[int]string{}
			}
			if _, ok := e.toolIDs[idx]; !ok {
				e.toolIDs[idx] = tc.ID
			}
		}
		if id, ok := e.toolIDs[idx]; ok && tc.ID != "" && id != tc.ID {
			// Upstreams that number every call 0 (Ollama): a new id at a
			// used index is a new call, and that index's later deltas are
			// its.
			if e.remap == nil {
				e.remap = map[int]int{}
			}
			e.remap[idx] = 1<<30 + len(e.toolBlocks)
		}
		if r, ok := e.remap[idx]; ok {
			idx = r
		}
	case e.openTool >= 0 && tc.ID == "":
		idx = e.openTool // a continuation without an index
	default:
		idx = len(e.toolBlocks)
		for {
			if _, used := e.toolBlocks[idx]; !used {
				break
			}
			idx++
		}
	}
	block, seen := e.toolBlocks[idx]
	if !seen {
		if err := e.closeBlock(); err != nil {
			return err
		}
		id := tc.ID
		if id == "" {
			id = anthropicNewID("toolu_")
		}
		block = e.nextBlock
		e.nextBlock++
		e.toolBlocks[idx] = block
		e.open, e.openTool = block, idx
		if err := e.event("content_block_start", anthropicEventBlockStart{Type: "content_block_start", Index: block,
			ContentBlock: anthropicToolUseBlock{Type: "tool_use", ID: id, Name: tc.Function.Name, Input: json.RawMessage(`{}`)}}); err != nil {
			return err
		}
	}
	if tc.Function.Arguments == "" {
		return nil
	}
	// A delta for a call whose block was already closed (providers that
	// interleave calls) still names that call's block.
	return e.event("content_block_delta", anthropicEventBlockDelta{Type: "content_block_delta", Index: block,
		Delta: anthropicJSONDelta{Type: "input_json_delta", PartialJSON: tc.Function.Arguments}})
}

// WriteChunk writes the events for one chunk.
func (e *anthropicStreamEncoder) WriteChunk(c *Chunk) error {
	if e.closed || c == nil {
		return nil
	}
	if !e.started {
		if err := e.start(c); err != nil {
			return err
		}
	}
	if c.Usage != nil {
		e.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // Anthropic has one choice; n > 1 is refused upstream of here
		}
		if ch.Delta.Content != nil {
			if err := e.text(*ch.Delta.Content); err != nil {
				return err
			}
		}
		if ch.Delta.Refusal != nil {
			if err := e.text(*ch.Delta.Refusal); err != nil {
				return err
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			if err := e.toolCall(tc); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil {
			e.finish = *ch.FinishReason
			if err := e.closeBlock(); err != nil {
				return err
			}
		}
	}
	return e.flush()
}

// Close writes message_delta (with the stop reason and usage) and
// message_stop.
func (e *anthropicStreamEncoder) Close(usage *Usage) error {
	if e.closed {
		return nil
	}
	e.closed = true
	if !e.started {
		if err := e.start(nil); err != nil {
			return err
		}
	}
	if err := e.closeBlock(); err != nil {
		return err
	}
	if usage == nil {
		usage = e.usage
	}
	md := anthropicEventMessageDelta{Type: "message_delta"}
	md.Delta.StopReason = anthropicStopReason(e.finish)
	if usage != nil {
		md.Usage = anthropicUsageOf(usage)
	} else {
		md.Usage = anthropicOutputUsage{}
	}
	if err := e.event("message_delta", md); err != nil {
		return err
	}
	if err := e.event("message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"}); err != nil {
		return err
	}
	return e.flush()
}

// Fail writes an error event; the stream ends with it.
func (e *anthropicStreamEncoder) Fail(err *Error) error {
	if e.closed {
		return nil
	}
	e.closed = true
	e.buf.Reset()
	e.buf.WriteString("event: error\ndata: ")
	e.buf.Write(anthropicErrorJSON(err))
	e.buf.WriteString("\n\n")
	return e.flush()
}

// ---- count_tokens ----
