package ledger

import (
	"context"
	"fmt"
	"testing"
)

func TestQueryFiltersByModelAndErrorsOnEveryPath(t *testing.T) {
	l := openTest(t, t.TempDir(), 0)
	base := testBase()
	for i := range 12 {
		rec, uses := genRecord(base, i)
		rec.Model = []string{"gpt", "claude"}[i%2]
		if i%3 == 0 {
			rec.Status = []int32{429, 500, 499, 400}[i/3]
		}
		if err := l.Append(rec, uses); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	// Records: model gpt on even i, failed when i%3 == 0 (0, 3, 6, 9);
	// key-(i%5), team-(i%5%2).
	tests := []struct {
		name string
		q    Query
		want string
	}{
		{"model", Query{Model: "claude"}, "[req-11 req-9 req-7 req-5 req-3 req-1]"},
		{"errors", Query{ErrorsOnly: true}, "[req-9 req-6 req-3 req-0]"},
		{"model and errors", Query{Model: "gpt", ErrorsOnly: true}, "[req-6 req-0]"},
		{"key and model", Query{KeyID: "key-1", Model: "claude"}, "[req-11 req-1]"},
		{"team and errors", Query{TeamID: "team-1", ErrorsOnly: true}, "[req-6 req-3]"},
		{"errors limit", Query{ErrorsOnly: true, Limit: 2}, "[req-9 req-6]"},
		{"unknown model", Query{Model: "none"}, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := l.Query(ctx, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.GetRequestId())
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("got %v, want %s", got, tt.want)
			}
		})
	}
}
