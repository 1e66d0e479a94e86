package proxy

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/ratelimit"
)

// appendReset writes what OpenAI's headers hold: milliseconds under a
// second, else Go's duration text rounded to the second.
func TestAppendReset(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, 999 * time.Millisecond, time.Second, 1500 * time.Millisecond,
		59 * time.Second, time.Minute, 6 * time.Minute, 61*time.Minute + 5*time.Second, 25 * time.Hour, 3*time.Hour + 59*time.Minute + 59*time.Second + 600*time.Millisecond} {
		want := d.Round(time.Second).String()
		if d < time.Second {
			want = strconv.FormatInt(d.Milliseconds(), 10) + "ms"
		}
		if got := string(appendReset(nil, d)); got != want {
			t.Errorf("appendReset(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestSetRateHeaders(t *testing.T) {
	h := http.Header{}
	setRateHeaders(h, ratelimit.Status{LimitRequests: 600, RemainingRequests: -3, ResetRequests: 1500 * time.Millisecond,
		LimitTokens: 30000, RemainingTokens: 29000, ResetTokens: 250 * time.Millisecond})
	for k, want := range map[string]string{
		"X-Ratelimit-Limit-Requests": "600", "X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "2s",
		"X-Ratelimit-Limit-Tokens": "30000", "X-Ratelimit-Remaining-Tokens": "29000", "X-Ratelimit-Reset-Tokens": "250ms",
	} {
		if got := h[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	h = http.Header{}
	setRateHeaders(h, ratelimit.Status{LimitTokens: 100, RemainingTokens: 40, ResetTokens: time.Minute})
	if len(h) != 3 || h.Get("X-Ratelimit-Limit-Tokens") != "100" || h.Get("X-Ratelimit-Remaining-Tokens") != "40" ||
		h.Get("X-Ratelimit-Reset-Tokens") != "1m0s" {
		t.Errorf("tokens only: %v", h)
	}
	h = http.Header{}
	setRateHeaders(h, ratelimit.Status{})
	if len(h) != 0 {
		t.Errorf("no limits: %v", h)
	}
}
