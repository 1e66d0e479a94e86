package translate

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// NewStreamEncoder writes a canonical stream as Responses streaming events.
func (in responsesInbound) NewStreamEncoder(w io.Writer, model string) StreamEncoder {
	return &responsesStream{w: w, model: model, echo: in.echo, toolItems: map[int]*respStreamItem{}}
}

// respStreamItem is an output item being streamed.
type respStreamItem struct {
	isCall bool
	index  int // output_index
	id     string
	status string // in_progress, completed, incomplete
	// Message items: the content parts so far; the last is open while
	// partOpen.
	parts    []respStreamPart
	partOpen bool
	// Function call items.
	callID, name string
	namespace    string          // the client's namespace of the function, if any
	args         strings.Builder // the arguments written as deltas so far
	held         []string        // pieces received while not shown, in order
	shown        bool            // output_item.added written
	sealed       bool            // can get no more pieces: finish it when it comes first
	closed       bool            // finished (or failed): later pieces are dropped
}

type respStreamPart struct {
	refusal bool
	text    strings.Builder
}

// wire returns the item as the Response object and events show it.
func (it *respStreamItem) wire() any {
	if it.isCall {
		return respCallItem{ID: it.id, Type: "function_call", Status: it.status,
			Arguments: it.args.String(), CallID: it.callID, Name: it.name, Namespace: it.namespace}
	}
	content := make([]any, 0, len(it.parts))
	for i := range it.parts {
		content = append(content, it.parts[i].wire())
	}
	return respMessageItem{ID: it.id, Type: "message", Status: it.status, Content: content, Role: "assistant"}
}

func (p *respStreamPart) wire() any {
	if p.refusal {
		return respRefusalPart{Type: "refusal", Refusal: p.text.String()}
	}
	return newRespTextPart(p.text.String())
}

// responsesStream turns canonical chunks into Responses events: the
// response is created on the first chunk; text opens a message item,
// each tool call a function_call item; Close reports the whole response.
//
// Items are streamed one after the other, in output order, as the
// Responses API streams them: the events of one item (output_item.added,
// its deltas, its .done events, output_item.done) are never interleaved
// with another item's. A message item is finished when a tool call starts
// or the choice finishes.
//
// Function_call items stay open until the choice finishes, because an
// upstream may interleave the pieces of parallel tool calls (a piece for
// call 0 after call 1 started). Of the open calls, the first in output
// order is shown: its output_item.added and then a delta for each piece
// are written as the pieces arrive. The pieces of the later open calls
// are held; a call is shown (output_item.added, then one delta for each
// held piece, in the order received) when the calls before it are
// finished, and streams live from then on. So every piece becomes a
// delta of its own item, and each call's function_call_arguments.done and
// output_item.done carry all its arguments, which the final Response
// repeats. When calls arrive one after the other (the usual case) the
// events are exactly those of finishing each call when the next starts;
// only the later calls' events come later, when the choice finishes. (A
// stream that fails is the exception: its earlier calls were still open,
// so they are not done but incomplete, like the last.)
//
// Open calls are finished, in output order, when the choice finishes
// (finish_reason), at Close, and when text or a refusal arrives: a
// message item does not start while calls are open, and the calls before
// it are taken as complete (an upstream rarely sends text after tool
// calls). A call whose tool-call index is taken by a new call (an upstream
// that numbers every call 0 and tells them apart by id) can get no more
// pieces, so it is finished as soon as it is the first open call. Fail
// shows the held calls and marks every open item incomplete, finishing
// none.
type responsesStream struct {
	w     io.Writer
	model string
	echo  responsesEcho

	started   bool
	done      bool
	seq       int
	id, base  string
	createdAt int64

	items     []*respStreamItem
	msg       *respStreamItem         // the open message item, nil if none
	open      []*respStreamItem       // the open function_call items, in output order
	last      *respStreamItem         // the item that got the latest content
	toolItems map[int]*respStreamItem // canonical tool-call index -> its (latest) call
	messages  int                     // message items so far
	calls     int                     // function_call items so far
	finish    string
	usage     *Usage
}

// event payloads; respEvHeader comes first in each.
type respEvHeader struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

func (h *respEvHeader) header() *respEvHeader { return h }

type respEvent interface{ header() *respEvHeader }

type respEvResponse struct {
	respEvHeader
	Response *respObject `json:"response"`
}

type respEvItem struct {
	respEvHeader
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"`
}

type respEvPart struct {
	respEvHeader
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Part         any    `json:"part"`
}

type respEvTextDelta struct {
	respEvHeader
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
	Logprobs     []any  `json:"logprobs"`
}

type respEvTextDone struct {
	respEvHeader
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Text         string `json:"text"`
	Logprobs     []any  `json:"logprobs"`
}

type respEvRefusalDelta struct {
	respEvHeader
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
}

type respEvRefusalDone struct {
	respEvHeader
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Refusal      string `json:"refusal"`
}

type respEvArgsDelta struct {
	respEvHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
}

type respEvArgsDone struct {
	respEvHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Name        string `json:"name"`
	Arguments   string `json:"arguments"`
}

type respEvError struct {
	respEvHeader
	Code    *string `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

// emit writes one event as "event: <type>\ndata: <json>\n\n".
func (s *responsesStream) emit(typ string, ev respEvent) error {
	h := ev.header()
	h.Type, h.SequenceNumber = typ, s.seq
	s.seq++
	data, err := respMarshal(ev)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(typ)+len(data)+16)
	buf = append(buf, "event: "...)
	buf = append(buf, typ...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	_, err = s.w.Write(buf)
	return err
}

// snapshot returns the Response object as it stands.
func (s *responsesStream) snapshot(status string) *respObject {
	obj := s.echo.newResponseObject(s.id, s.createdAt, s.model, status)
	for _, it := range s.items {
		obj.Output = append(obj.Output, it.wire())
	}
	return obj
}

// start emits response.created and response.in_progress once.
func (s *responsesStream) start(c *Chunk) error {
	if s.started {
		return nil
	}
	s.started = true
	upstreamID := ""
	if c != nil {
		upstreamID = c.ID
		if s.model == "" {
			s.model = c.Model
		}
		s.createdAt = c.Created
	}
	s.id, s.base = respIDs(upstreamID)
	if s.createdAt == 0 {
		s.createdAt = time.Now().Unix()
	}
	if err := s.emit("response.created", &respEvResponse{Response: s.snapshot("in_progress")}); err != nil {
		return err
	}
	return s.emit("response.in_progress", &respEvResponse{Response: s.snapshot("in_progress")})
}

// WriteChunk writes the events for one chunk.
func (s *responsesStream) WriteChunk(c *Chunk) error {
	if s.done {
		return errors.New("translate: chunk written after the Responses stream ended")
	}
	if c == nil {
		return nil
	}
	if err := s.start(c); err != nil {
		return err
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // the Responses API has one answer per response
		}
		if err := s.writeDelta(&ch.Delta); err != nil {
			return err
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
			if err := s.closeOpen(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *responsesStream) writeDelta(d *Delta) error {
	if d.Content != nil && *d.Content != "" {
		if err := s.writeMessageDelta(false, *d.Content); err != nil {
			return err
		}
	}
	if d.Refusal != nil && *d.Refusal != "" {
		if err := s.writeMessageDelta(true, *d.Refusal); err != nil {
			return err
		}
	}
	for i := range d.ToolCalls {
		if err := s.writeToolCallDelta(&d.ToolCalls[i], i); err != nil {
			return err
		}
	}
	return nil
}

// writeMessageDelta adds text (or refusal text) to the open message item,
// opening the item and the content part as needed.
func (s *responsesStream) writeMessageDelta(refusal bool, delta string) error {
	// A message does not start while calls are open: they are finished
	// first (see responsesStream).
	if err := s.closeCalls(); err != nil {
		return err
	}
	if s.msg == nil {
		it := &respStreamItem{index: len(s.items), id: respMessageID(s.base, s.messages), status: "in_progress"}
		s.messages++
		s.items = append(s.items, it)
		s.msg = it
		if err := s.emit("response.output_item.added", &respEvItem{OutputIndex: it.index, Item: it.wire()}); err != nil {
			return err
		}
	}
	it := s.msg
	s.last = it
	if it.partOpen && it.parts[len(it.parts)-1].refusal != refusal {
		if err := s.closePart(it); err != nil {
			return err
		}
	}
	if !it.partOpen {
		it.parts = append(it.parts, respStreamPart{refusal: refusal})
		it.partOpen = true
		p := &it.parts[len(it.parts)-1]
		if err := s.emit("response.content_part.added", &respEvPart{ItemID: it.id, OutputIndex: it.index,
			ContentIndex: len(it.parts) - 1, Part: p.wire()}); err != nil {
			return err
		}
	}
	ci := len(it.parts) - 1
	it.parts[ci].text.WriteString(delta)
	if refusal {
		return s.emit("response.refusal.delta", &respEvRefusalDelta{ItemID: it.id, OutputIndex: it.index, ContentIndex: ci, Delta: delta})
	}
	return s.emit("response.output_text.delta", &respEvTextDelta{ItemID: it.id, OutputIndex: it.index, ContentIndex: ci, Delta: delta, Logprobs: []any{}})
}

// writeToolCallDelta adds a piece of a tool call. pos is its place in the
// chunk's tool_calls, the key when the upstream sent no index. The piece
// is written as a delta at once if its call is shown, or held until it is
// (see responsesStream).
func (s *responsesStream) writeToolCallDelta(tc *ToolCall, pos int) error {
	key := pos
	if tc.Index != nil {
		key = *tc.Index
	}
	it := s.toolItems[key]
	// An upstream that numbers every call 0 still names each new one.
	if it == nil || tc.ID != "" && it.callID != "" && tc.ID != it.callID {
		if err := s.closeMessage(); err != nil {
			return err
		}
		if it != nil {
			it.sealed = true // its key now names the new call
		}
		it = &respStreamItem{isCall: true, index: len(s.items), id: respCallID(s.base, s.calls), status: "in_progress",
			callID: tc.ID}
		it.name, it.namespace = s.echo.callName(tc.Function.Name)
		s.calls++
		s.items = append(s.items, it)
		s.toolItems[key] = it
		s.open = append(s.open, it)
	} else if it.closed {
		// A piece for a call already finished: text came between its
		// pieces, or it came after the choice finished. Its
		// output_item.done is written and cannot be taken back, so the
		// piece is dropped, from the final Response too, which stays
		// what the events said.
		return nil
	}
	s.last = it
	if it.callID == "" {
		it.callID = tc.ID
	}
	if it.name == "" {
		it.name, it.namespace = s.echo.callName(tc.Function.Name)
	}
	if a := tc.Function.Arguments; a != "" {
		if !it.shown {
			it.held = append(it.held, a)
		} else {
			it.args.WriteString(a)
			if err := s.emit("response.function_call_arguments.delta", &respEvArgsDelta{ItemID: it.id, OutputIndex: it.index, Delta: a}); err != nil {
				return err
			}
		}
	}
	return s.settle()
}

// settle shows the first open call and, while it is sealed, finishes it
// and goes on with the next.
func (s *responsesStream) settle() error {
	for len(s.open) > 0 {
		it := s.open[0]
		if err := s.showCall(it); err != nil {
			return err
		}
		if !it.sealed {
			return nil
		}
		s.open = s.open[1:]
		if err := s.closeCall(it); err != nil {
			return err
		}
	}
	return nil
}

// showCall writes a call's output_item.added, if not yet written, and a
// delta for each piece held.
func (s *responsesStream) showCall(it *respStreamItem) error {
	if !it.shown {
		it.shown = true
		if err := s.emit("response.output_item.added", &respEvItem{OutputIndex: it.index, Item: it.wire()}); err != nil {
			return err
		}
	}
	held := it.held
	it.held = nil
	for _, a := range held {
		it.args.WriteString(a)
		if err := s.emit("response.function_call_arguments.delta", &respEvArgsDelta{ItemID: it.id, OutputIndex: it.index, Delta: a}); err != nil {
			return err
		}
	}
	return nil
}

// closeCall finishes a shown call.
func (s *responsesStream) closeCall(it *respStreamItem) error {
	it.closed = true
	if err := s.emit("response.function_call_arguments.done", &respEvArgsDone{ItemID: it.id, OutputIndex: it.index,
		Name: it.name, Arguments: it.args.String()}); err != nil {
		return err
	}
	it.status = s.doneStatus(it)
	return s.emit("response.output_item.done", &respEvItem{OutputIndex: it.index, Item: it.wire()})
}

// closeCalls finishes the open calls, in output order.
func (s *responsesStream) closeCalls() error {
	for _, it := range s.open {
		it.sealed = true
	}
	return s.settle()
}

// closeMessage finishes the open message item.
func (s *responsesStream) closeMessage() error {
	it := s.msg
	if it == nil {
		return nil
	}
	if err := s.closePart(it); err != nil {
		return err
	}
	s.msg = nil
	it.closed = true
	it.status = s.doneStatus(it)
	return s.emit("response.output_item.done", &respEvItem{OutputIndex: it.index, Item: it.wire()})
}

// closeOpen finishes the open items (a message, or calls).
func (s *responsesStream) closeOpen() error {
	if err := s.closeMessage(); err != nil {
		return err
	}
	return s.closeCalls()
}

// doneStatus is the status of an item being finished: when the choice
// stopped short (length, content filter), the item the model was writing
// (the one that got the latest content) is incomplete, as the last item
// of a Response that is not streamed is; the others are completed.
func (s *responsesStream) doneStatus(it *respStreamItem) string {
	if it == s.last && respIncompleteReason(s.finish) != "" {
		return "incomplete"
	}
	return "completed"
}

// closePart finishes the open content part of a message item.
func (s *responsesStream) closePart(it *respStreamItem) error {
	if !it.partOpen {
		return nil
	}
	it.partOpen = false
	ci := len(it.parts) - 1
	p := &it.parts[ci]
	var err error
	if p.refusal {
		err = s.emit("response.refusal.done", &respEvRefusalDone{ItemID: it.id, OutputIndex: it.index, ContentIndex: ci, Refusal: p.text.String()})
	} else {
		err = s.emit("response.output_text.done", &respEvTextDone{ItemID: it.id, OutputIndex: it.index, ContentIndex: ci, Text: p.text.String(), Logprobs: []any{}})
	}
	if err != nil {
		return err
	}
	return s.emit("response.content_part.done", &respEvPart{ItemID: it.id, OutputIndex: it.index, ContentIndex: ci, Part: p.wire()})
}

// Close finishes the open items and writes response.completed, or
// response.incomplete when the answer stopped short, with the whole
// Response and its usage.
func (s *responsesStream) Close(usage *Usage) error {
	if s.done {
		return nil
	}
	if err := s.start(nil); err != nil {
		return err
	}
	if err := s.closeOpen(); err != nil {
		return err
	}
	if len(s.items) == 0 {
		// An empty answer is still one (empty) message, as in a
		// non-streamed Response.
		if err := s.writeEmptyMessage(); err != nil {
			return err
		}
	}
	s.done = true
	if usage == nil {
		usage = s.usage
	}
	typ, status := "response.completed", "completed"
	var details *respIncomplete
	if reason := respIncompleteReason(s.finish); reason != "" {
		typ, status = "response.incomplete", "incomplete"
		details = &respIncomplete{Reason: reason}
	}
	obj := s.snapshot(status)
	obj.IncompleteDetails = details
	obj.Usage = respUsageFrom(usage)
	return s.emit(typ, &respEvResponse{Response: obj})
}

// writeEmptyMessage writes the events of a message item with empty text.
func (s *responsesStream) writeEmptyMessage() error {
	it := &respStreamItem{index: len(s.items), id: respMessageID(s.base, s.messages), status: "in_progress"}
	s.messages++
	s.items = append(s.items, it)
	s.msg, s.last = it, it
	if err := s.emit("response.output_item.added", &respEvItem{OutputIndex: it.index, Item: it.wire()}); err != nil {
		return err
	}
	it.parts = append(it.parts, respStreamPart{})
	it.partOpen = true
	if err := s.emit("response.content_part.added", &respEvPart{ItemID: it.id, OutputIndex: it.index, ContentIndex: 0, Part: it.parts[0].wire()}); err != nil {
		return err
	}
	return s.closeMessage()
}

// Fail writes an "error" event and then response.failed with the
// Response as it stood: the calls held are shown first (so that the
// events add every item the Response holds), and the open items are
// marked incomplete, none finished.
func (s *responsesStream) Fail(e *Error) error {
	if s.done {
		return nil
	}
	if e == nil {
		e = &Error{Status: http.StatusInternalServerError, Message: "The stream failed."}
	}
	if err := s.start(nil); err != nil {
		return err
	}
	s.done = true
	for _, it := range s.open {
		if err := s.showCall(it); err != nil {
			return err
		}
	}
	open := s.open
	if s.msg != nil {
		open = []*respStreamItem{s.msg} // a message and calls are never open together
	}
	for _, it := range open {
		it.status = "incomplete"
		it.partOpen = false
		it.closed = true
	}
	s.msg, s.open = nil, nil
	code := e.Code
	if code == "" {
		code = e.Type
	}
	if err := s.emit("error", &respEvError{Code: respOptString(code), Message: e.Message, Param: respOptString(e.Param)}); err != nil {
		return err
	}
	obj := s.snapshot("failed")
	obj.Error = &respError{Code: respFailedCode(e), Message: e.Message}
	obj.Usage = respUsageFrom(s.usage)
	return s.emit("response.failed", &respEvResponse{Response: obj})
}

// respFailedCode maps an error to the codes the API documents for a failed
// Response's error (server_error, rate_limit_exceeded, invalid_prompt,
// ...).
func respFailedCode(e *Error) string {
	switch e.Kind {
	case KindRateLimited, KindQuotaExhausted:
		return "rate_limit_exceeded"
	case KindInvalidRequest, KindContextOverflow:
		return "invalid_prompt"
	}
	if e.Status == http.StatusTooManyRequests {
		return "rate_limit_exceeded"
	}
	return "server_error"
}
