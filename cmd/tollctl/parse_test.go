package main

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"30d", 30 * day, false},
		{"2w", 14 * day, false},
		{"90m", 90 * time.Minute, false},
		{"12h", 12 * time.Hour, false},
		{"1h30m", 90 * time.Minute, false},
		{"1w2d", 9 * day, false},
		{"1d12h", 36 * time.Hour, false},
		{"1.5d", 36 * time.Hour, false},
		{"500ms", 500 * time.Millisecond, false},
		{"0", 0, false},
		{"bad", 0, true},
		{"", 0, true},
		{"30", 0, true},
		{"d", 0, true},
		{"-5m", 0, true},
		{"10x", 0, true},
		{"2w-1d", 0, true},
		{"1..5d", 0, true},
		{"99999999999w", 0, true},
	}
	for _, tt := range tests {
		got, err := parseDuration(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("parseDuration(%q) = %v, want error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseLabels(t *testing.T) {
	m, err := parseLabels([]string{"team=infra", "note=a=b,c", "gone="})
	if err != nil {
		t.Fatal(err)
	}
	if m["team"] != "infra" || m["note"] != "a=b,c" || len(m) != 3 || m["gone"] != "" {
		t.Errorf("parseLabels = %v", m)
	}
	for _, bad := range []string{"noequals", "=v"} {
		if _, err := parseLabels([]string{bad}); err == nil {
			t.Errorf("parseLabels(%q): want error", bad)
		}
	}
}
