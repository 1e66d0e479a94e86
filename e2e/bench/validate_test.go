package main

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
)

func streamText(chunks int, done bool, eol string) string {
	var b strings.Builder
	for i := 0; i < chunks; i++ {
		fmt.Fprintf(&b, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok %d\"}}]}%s%s", i, eol, eol)
	}
	if done {
		b.WriteString("data: [DONE]" + eol + eol)
	}
	return b.String()
}

func TestReadStream(t *testing.T) {
	read := func(s string, expect int) (*Hist, error) {
		var gaps Hist
		_, err := readStream(bufio.NewReaderSize(strings.NewReader(s), 4096), expect, &gaps)
		return &gaps, err
	}
	gaps, err := read(streamText(50, true, "\n"), 50)
	if err != nil || gaps.Count() != 49 {
		t.Fatalf("good stream: %v, %d gaps", err, gaps.Count())
	}
	if _, err := read(streamText(3, true, "\r\n"), 3); err != nil {
		t.Fatalf("CRLF stream: %v", err)
	}
	if _, err := read(": keep-alive\n\n"+streamText(2, true, "\n"), 2); err != nil {
		t.Fatalf("comment line: %v", err)
	}
	bad := map[string]string{
		"no [DONE]":         streamText(50, false, "\n"),
		"too few chunks":    streamText(49, true, "\n"),
		"too many chunks":   streamText(51, true, "\n"),
		"data after [DONE]": streamText(2, true, "\n") + "data: {\"choices\":[{}]}\n\n",
		"error event":       streamText(2, false, "\n") + "data: {\"error\":{\"message\":\"upstream failed\"}}\n\ndata: [DONE]\n\n",
		"not JSON":          "data: hello\n\ndata: [DONE]\n\n",
		"empty choices":     "data: {\"choices\":[]}\n\ndata: [DONE]\n\n",
		"empty body":        "",
		"line too long":     "data: {\"choices\":[\"" + strings.Repeat("x", 5000) + "\"]}\n\ndata: [DONE]\n\n",
	}
	for name, s := range bad {
		want := 2
		if strings.Contains(name, "chunks") || name == "no [DONE]" {
			want = 50
		} else if name == "not JSON" || name == "empty choices" || name == "line too long" {
			want = 1
		}
		if _, err := read(s, want); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestValidateBody(t *testing.T) {
	good := `{"id":"x","choices":[{"index":0,"message":{"content":"hi"}}],"usage":{}}`
	if err := validateBody([]byte(good), "choices", 10); err != nil {
		t.Fatal(err)
	}
	emb := `{"object":"list","data":[{"embedding":[0.1,0.2]}],"model":"m"}`
	if err := validateBody([]byte(emb), "data", 10); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]string{
		"too short":       good,
		"not JSON":        `{"choices":[{"index":0}]` + strings.Repeat(" ", 100),
		"error body":      `{"error":{"message":"choices are bad","type":"x","choices":[1]}}` + strings.Repeat(" ", 100),
		"empty choices":   `{"choices":[],"x":"` + strings.Repeat("a", 100) + `"}`,
		"choices in text": `{"text":"\"choices\":[1]","y":"` + strings.Repeat("a", 100) + `"}`,
		"not an object":   `[{"choices":[1]}]` + strings.Repeat(" ", 100),
	} {
		min := 20
		if name == "too short" {
			min = 10_000
		}
		if err := validateBody([]byte(b), "choices", min); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestTopLevelArrayNonEmpty(t *testing.T) {
	cases := map[string]bool{
		`{"choices":[1]}`: true,
		` { "a" : {"choices":[]} , "choices" : [ {} ] } `: true,
		`{"a":"x\"choices\":[1]","choices":[]}`:           false,
		`{"a":{"choices":[1]}}`:                           false,
		`{"a":[{"choices":[1]}],"b":1}`:                   false,
		`{"choices":{"0":1}}`:                             false,
		`{"a":["x","choices"],"choices":[null]}`:          true,
		`{"a":{"b":"c"},"choices":["\\"]}`:                true,
		`"choices"`:                                       false,
	}
	for in, want := range cases {
		if got := topLevelArrayNonEmpty([]byte(in), "choices"); got != want {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
}

func TestReadAllIntoReuses(t *testing.T) {
	buf := make([]byte, 0, 8)
	b, err := readAllInto(strings.NewReader(strings.Repeat("x", 5000)), buf)
	if err != nil || len(b) != 5000 {
		t.Fatalf("%d %v", len(b), err)
	}
	c, _ := readAllInto(strings.NewReader("abc"), b[:0])
	if string(c) != "abc" || &c[0] != &b[0] {
		t.Fatal("buffer not reused")
	}
}
