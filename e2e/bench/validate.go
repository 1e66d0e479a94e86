package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Every response is validated; a response that fails is an error of the
// run, never a (suspiciously fast) success.

// topLevelArrayNonEmpty reports whether the JSON object b has, at its top
// level, the key with an array value holding at least one element. b must
// be valid JSON (check with json.Valid first). It does not allocate.
func topLevelArrayNonEmpty(b []byte, key string) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	depth := 0
	expectKey := false
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '{', '[':
			depth++
			expectKey = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		case '"':
			end := stringEnd(b, i)
			if end < 0 {
				return false
			}
			if depth == 1 && expectKey {
				expectKey = false
				name := b[i+1 : end]
				j := skipSpace(b, end+1)
				if j < len(b) && b[j] == ':' && string(name) == key {
					j = skipSpace(b, j+1)
					if j >= len(b) || b[j] != '[' {
						return false
					}
					j = skipSpace(b, j+1)
					return j < len(b) && b[j] != ']'
				}
			}
			i = end
		}
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index of the quote closing the string that opens at
// b[i], or -1.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// validateBody checks a non-streaming response body: valid JSON, an object
// with a non-empty top-level array named shape ("choices" or "data"), and
// at least minBytes long.
func validateBody(b []byte, shape string, minBytes int) error {
	if len(b) < minBytes {
		return fmt.Errorf("body of %d bytes, want at least %d: %.120q", len(b), minBytes, b)
	}
	if !json.Valid(b) {
		return fmt.Errorf("body is not valid JSON: %.120q", b)
	}
	if !topLevelArrayNonEmpty(b, shape) {
		return fmt.Errorf("body has no non-empty %q array: %.120q", shape, b)
	}
	return nil
}

var (
	errNoDone        = errors.New("stream ended without data: [DONE]")
	errDataAfterDone = errors.New("stream has data after [DONE]")
	errLongLine      = errors.New("stream line longer than the read buffer")
)

// readStream reads a server-sent-event stream to its end and validates it:
// every data event before the terminator is a JSON object with a non-empty
// "choices" array, exactly expect of them, then "data: [DONE]" and nothing
// after it. It returns when the first chunk arrived and records the gap
// between consecutive chunks into gaps (if not nil).
func readStream(br *bufio.Reader, expect int, gaps *Hist) (first time.Time, err error) {
	var last time.Time
	chunks := 0
	done := false
	for {
		line, rerr := br.ReadSlice('\n')
		if rerr == bufio.ErrBufferFull {
			return first, errLongLine
		}
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			if payload, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if len(payload) > 0 && payload[0] == ' ' {
					payload = payload[1:]
				}
				switch {
				case done:
					return first, errDataAfterDone
				case string(payload) == "[DONE]":
					done = true
				case !json.Valid(payload) || !topLevelArrayNonEmpty(payload, "choices"):
					return first, fmt.Errorf("stream chunk %d is not a completion chunk: %.120q", chunks+1, payload)
				default:
					now := time.Now()
					if chunks == 0 {
						first = now
					} else if gaps != nil {
						gaps.Record(now.Sub(last))
					}
					last = now
					chunks++
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return first, fmt.Errorf("stream cut after %d chunks: %w", chunks, rerr)
		}
	}
	if !done {
		return first, fmt.Errorf("%w (%d chunks)", errNoDone, chunks)
	}
	if chunks != expect {
		return first, fmt.Errorf("stream had %d chunks, want %d", chunks, expect)
	}
	return first, nil
}

// readAllInto reads r to its end into buf (reused across calls), growing
// it only when a body is larger than any before.
func readAllInto(r io.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
