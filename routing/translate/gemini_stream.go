package translate

// The Gemini stream decoder: a streamGenerateContent?alt=sse answer as
// canonical chunks.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// NewStreamDecoder reads a streamGenerateContent?alt=sse answer.
func (geminiProvider) NewStreamDecoder(r io.Reader, model string) StreamDecoder {
	return &geminiStream{r: bufio.NewReaderSize(r, 64<<10), model: model}
}

// geminiStream decodes a streamGenerateContent?alt=sse answer. Every event
// is a whole GenerateContentResponse: text arrives in pieces, function
// calls whole. The finish reason and the usage are held back until the body
// ends, because some models repeat finishReason on every event and the last
// event carries the final token counts.
type geminiStream struct {
	r     *bufio.Reader
	model string

	id      string
	created int64
	events  int  // events decoded
	started bool // the role has been sent
	calls   int  // tool calls sent
	finish  string
	usage   *Usage

	pending []*Chunk // chunks decoded but not yet returned
	lines   [][]byte // lines read but not yet parsed
	eof     bool
	err     error // the sticky final error (io.EOF after a clean end)
}

func (s *geminiStream) Next() (*Chunk, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return nil, s.err
		}
		data, err := s.event()
		switch {
		case err == io.EOF:
			s.finishStream()
		case err != nil:
			s.err = err
		default:
			if perr := s.decode(data); perr != nil {
				s.err = perr
			}
		}
	}
	c := s.pending[0]
	s.pending = s.pending[1:]
	return c, nil
}

// event returns the data of the next event with data, io.EOF at the end of
// the body.
func (s *geminiStream) event() ([]byte, error) {
	var data []byte
	has := false
	for {
		line, err := s.line()
		if err == io.EOF {
			if has {
				return data, nil // the body ended without a blank line
			}
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if has {
				return data, nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue // comments, event:, id:, retry:
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if has {
			data = append(data, '\n')
		}
		if len(data)+len(value) > geminiMaxEvent {
			return nil, BadResponse(geminiName, "a stream event exceeds %d bytes", geminiMaxEvent)
		}
		data = append(data, value...)
		has = true
	}
}

// line returns the next line without its terminator (\n, \r\n or \r).
func (s *geminiStream) line() ([]byte, error) {
	for len(s.lines) == 0 {
		if s.eof {
			return nil, io.EOF
		}
		var buf []byte
		for {
			chunk, err := s.r.ReadSlice('\n')
			if len(buf)+len(chunk) > geminiMaxEvent {
				return nil, BadResponse(geminiName, "a stream line exceeds %d bytes", geminiMaxEvent)
			}
			buf = append(buf, chunk...)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				s.eof = true
				if len(buf) == 0 {
					return nil, io.EOF
				}
				break
			}
			if err != nil {
				return nil, err
			}
			break
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		// A lone \r also ends a line; JSON never holds a raw one.
		s.lines = append(s.lines, bytes.Split(buf, []byte("\r"))...)
	}
	l := s.lines[0]
	s.lines = s.lines[1:]
	return l, nil
}

// decode turns one event into chunks.
func (s *geminiStream) decode(data []byte) error {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		return nil
	}
	var r geminiResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return BadResponse(geminiName, "a stream event: %v", err)
	}
	if r.Error != nil {
		return geminiClassify(r.Error.Code, r.Error)
	}
	s.events++
	if s.id == "" {
		s.id = r.ResponseID
		if s.id == "" {
			s.id = geminiNewID()
		}
		s.created = geminiCreated(r.CreateTime)
	}
	if u := r.UsageMetadata.canonical(); u != nil {
		s.usage = u
	}
	if len(r.Candidates) == 0 {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			s.finish = FinishContentFilter
		}
		return nil
	}
	c := &r.Candidates[0]
	text, calls, err := geminiCandidateOutput(c, s.calls)
	if err != nil {
		return err
	}
	geminiFillCallIDs(calls, s.id, s.calls)
	if c.FinishReason != "" {
		s.finish = geminiFinish(c.FinishReason, false)
	}
	if text == "" && len(calls) == 0 && s.started {
		return nil
	}
	delta := Delta{}
	if !s.started {
		delta.Role = "assistant"
		s.started = true
	}
	if text != "" || len(calls) == 0 {
		delta.Content = &text
	}
	for i := range calls {
		idx := s.calls + i
		calls[i].Index = &idx
	}
	s.calls += len(calls)
	delta.ToolCalls = calls
	s.pending = append(s.pending, s.chunk([]ChunkChoice{{Delta: delta}}))
	return nil
}

// finishStream queues the closing chunks after the body ended.
func (s *geminiStream) finishStream() {
	s.err = io.EOF
	if s.events == 0 {
		s.err = BadResponse(geminiName, "the stream ended without any event")
		return
	}
	// As in ParseResponse: a turn that ends normally with function calls
	// ends for the tool calls.
	reason := s.finish
	if reason == "" || reason == FinishStop {
		reason = FinishStop
		if s.calls > 0 {
			reason = FinishToolCalls
		}
	}
	choice := ChunkChoice{FinishReason: &reason}
	if !s.started {
		choice.Delta.Role = "assistant"
		s.started = true
	}
	s.pending = append(s.pending, s.chunk([]ChunkChoice{choice}))
	if s.usage != nil {
		c := s.chunk([]ChunkChoice{})
		c.Usage = s.usage
		s.pending = append(s.pending, c)
	}
}

func (s *geminiStream) chunk(choices []ChunkChoice) *Chunk {
	return &Chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Choices: choices}
}
