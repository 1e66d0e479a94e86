package main

import (
	"math"
	"testing"
	"time"
)

func TestParseDollars(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"100", 100_000_000_000, false},
		{"12.50", 12_500_000_000, false},
		{"$0.75", 750_000_000, false},
		{"$5", 5_000_000_000, false},
		{"0.1", 100_000_000, false}, // exact: no float rounding
		{"0.3", 300_000_000, false},
		{"0.000001", 1_000, false},
		{"0.000000001", 1, false},
		{"12.345678901", 12_345_678_901, false}, // 9 decimals: exactly a nano-dollar
		{"12.3456789012", 0, true},              // 10 decimals
		{"1.0000000000", 0, true},
		{".5", 500_000_000, false},
		{"0", 0, false},
		{" 7 ", 7_000_000_000, false},
		{"9223372036.854775807", math.MaxInt64, false},
		{"9223372036.854775808", 0, true}, // overflows int64
		{"99999999999", 0, true},
		{"-1", 0, true},
		{"$-1", 0, true},
		{"+1", 0, true},
		{"1e3", 0, true},
		{"1,000", 0, true},
		{"1_000", 0, true},
		{"5.", 0, true},
		{".", 0, true},
		{"$", 0, true},
		{"", 0, true},
		{"1.2.3", 0, true},
		{"ten", 0, true},
		{"$$1", 0, true},
		{"0x10", 0, true},
		{"１", 0, true}, // non-ASCII digit
	}
	for _, tt := range tests {
		got, err := parseDollars(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("parseDollars(%q) = %d, want error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseDollars(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParsePrice(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"2.50", 2_500_000, false},
		{"10", 10_000_000, false},
		{"$0.15", 150_000, false},
		{"0.000001", 1, false},
		{"0.0000001", 0, true}, // below a micro-dollar
		{"0", 0, false},
		{"-2", 0, true},
		{"1e1", 0, true},
	}
	for _, tt := range tests {
		got, err := parsePrice(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("parsePrice(%q) = %d, want error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parsePrice(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestFmtNanos(t *testing.T) {
	for in, want := range map[int64]string{
		0:               "$0.0000",
		12_345_678_901:  "$12.3457",
		12_345_649_999:  "$12.3456",
		12_345_650_000:  "$12.3457", // half rounds up
		100_000_000:     "$0.1000",
		49_999:          "$0.0000",
		50_000:          "$0.0001",
		100_000_000_000: "$100.0000",
		-1_500_000_000:  "-$1.5000",
		math.MaxInt64:   "$9223372036.8548",
		math.MinInt64:   "-$9223372036.8548",
		999_999_950_000: "$1000.0000",
	} {
		if got := fmtNanos(in); got != want {
			t.Errorf("fmtNanos(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestFmtMicros(t *testing.T) {
	for in, want := range map[int64]string{
		0:          "$0.00",
		2_500_000:  "$2.50",
		10_000_000: "$10.00",
		150_000:    "$0.15",
		75_000:     "$0.075",
		1:          "$0.000001",
		1_250_000:  "$1.25",
	} {
		if got := fmtMicros(in); got != want {
			t.Errorf("fmtMicros(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 30, 0, 0, time.UTC)
	a := &app{now: func() time.Time { return now }}
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"7d", now.AddDate(0, 0, -7), false},
		{"24h", now.Add(-24 * time.Hour), false},
		{"1w2d", now.AddDate(0, 0, -9), false},
		{"0", now, false},
		{"2026-11-01", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), false},
		{"2026-11-01T09:00:00Z", time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), false},
		{"2026-11-01T09:00:00+02:00", time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC), false},
		{"1970-01-01", time.Unix(0, 0), false},
		{"1969-12-31", time.Time{}, true},
		{"yesterday", time.Time{}, true},
		{"2026-13-01", time.Time{}, true},
		{"2026-11-01 09:00", time.Time{}, true},
		{"-7d", time.Time{}, true},
		{"", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := a.parseWhen("since", tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("parseWhen(%q) = %d, want error", tt.in, got)
			} else if _, ok := err.(*usageError); !ok {
				t.Errorf("parseWhen(%q): %T is not a usage error", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want.Unix() {
			t.Errorf("parseWhen(%q) = %d, %v; want %d (%v)", tt.in, got, err, tt.want.Unix(), tt.want)
		}
	}
}
