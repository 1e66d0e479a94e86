package routing

import (
	"encoding/json"
	"testing"
)

// The fast search never counts fewer than the structural walk on valid
// JSON without \u escapes (with them, CountMedia walks); it may count more
// (media nested deeper than the walk goes).
func FuzzCountMedia(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`,
		`{"a":"\"type\":\"image\"","b":{"type" : "audio"},"c":["type","image"]}`,
		`{"type":"image","x":{"type":"input_image\\"}}`,
		`{"k":"\\\"type\":\"image\""}`,
		`{"type":{"type":"image"}}`,
		`{"TYPE":"image_url","Type":"audio"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		walked := 0
		countMedia(b, skipWS(b, 0), &walked, 0)
		if got := CountMedia(b); got < walked {
			t.Fatalf("CountMedia = %d, fewer than the walk's %d, for %s", got, walked, b)
		}
	})
}
