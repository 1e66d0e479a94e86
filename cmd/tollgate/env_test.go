package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// TestBooleanVariablesRefuseWhatIsNotABoolean: TOLLGATE_NO_SEED=false means
// false (it used to turn the flag on, as any non-empty value did), and a
// value that is not a boolean is reported instead of guessed.
func TestBooleanVariablesRefuseWhatIsNotABoolean(t *testing.T) {
	for _, tc := range []struct {
		value string
		code  int
	}{{"false", 0}, {"true", 0}, {"1", 0}, {"maybe", 2}} {
		t.Setenv("TOLLGATE_NO_SEED", tc.value)
		var stderr bytes.Buffer
		code := run([]string{"--version"}, &stderr)
		if code != tc.code {
			t.Errorf("TOLLGATE_NO_SEED=%s: exit %d (%s), want %d", tc.value, code, stderr.String(), tc.code)
		}
		if tc.code == 2 && !strings.Contains(stderr.String(), `TOLLGATE_NO_SEED="maybe" is not true or false`) {
			t.Errorf("TOLLGATE_NO_SEED=maybe: %q does not name the variable and its value", stderr.String())
		}
	}
}

// TestNoSeedFollowsTheVariable: the variable sets --no-seed's default.
func TestNoSeedFollowsTheVariable(t *testing.T) {
	for value, want := range map[string]bool{"": false, "false": false, "true": true} {
		t.Setenv("TOLLGATE_NO_SEED", value)
		var o options
		envErrs = nil
		o.define(flag.NewFlagSet("tollgate", flag.ContinueOnError))
		if o.noSeed != want {
			t.Errorf("TOLLGATE_NO_SEED=%q: --no-seed %v, want %v", value, o.noSeed, want)
		}
	}
}
