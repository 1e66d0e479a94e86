package main

import (
	"strings"
	"testing"
)

func TestCredentialSetFromStdin(t *testing.T) {
	f := startFake(t)
	const value = "sk-proj-very-secret-value-9876"
	for _, args := range [][]string{
		{"credential", "set", "openai"},
		{"credential", "set", "openai", "--stdin", "-o", "json"},
	} {
		r := f.runStdin(t, value+"\n", args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d stderr %q", args, r.code, r.stderr)
		}
		if got, _ := f.creds.value("openai"); got != value {
			t.Errorf("server got %q, want %q (newline trimmed)", got, value)
		}
		if strings.Contains(r.stdout+r.stderr, value) || strings.Contains(r.stdout+r.stderr, "very-secret") {
			t.Errorf("%v printed the value:\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "9876") {
			t.Errorf("%v: hint missing:\n%s", args, r.stdout)
		}
	}
}

func TestCredentialSetOtherSources(t *testing.T) {
	f := startFake(t)
	t.Setenv("TEST_TOLLCTL_SECRET", "from-env-value")
	if r := f.run(t, "credential", "set", "a", "--from-env", "TEST_TOLLCTL_SECRET"); r.code != 0 || strings.Contains(r.stdout+r.stderr, "from-env-value") {
		t.Errorf("--from-env: exit %d out %q err %q", r.code, r.stdout, r.stderr)
	}
	if v, _ := f.creds.value("a"); v != "from-env-value" {
		t.Errorf("server got %q", v)
	}

	r := f.run(t, "credential", "set", "b", "--value", "inline-value")
	if r.code != 0 || !strings.Contains(r.stderr, "shell history") || strings.Contains(r.stdout+r.stderr, "inline-value") {
		t.Errorf("--value: exit %d out %q err %q", r.code, r.stdout, r.stderr)
	}

	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"credential", "set", "c"}},
		{"\n", []string{"credential", "set", "c"}},
		{"", []string{"credential", "set", "c", "--from-env", "TEST_TOLLCTL_UNSET_VAR"}},
		{"x", []string{"credential", "set", "c", "--stdin", "--value", "y"}},
		{"x", []string{"credential", "set"}},
		{strings.Repeat("x", maxCredentialSize+1), []string{"credential", "set", "c"}},
	} {
		if r := f.runStdin(t, tc.stdin, tc.args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tc.args, r.code, r.stderr)
		}
	}
	if _, ok := f.creds.value("c"); ok {
		t.Error("bad input reached the server")
	}
}

func TestCredentialListAndDelete(t *testing.T) {
	f := startFake(t)
	f.runStdin(t, "sk-aaaa1111", "credential", "set", "openai")
	f.runStdin(t, "sk-bbbb2222", "credential", "set", "vllm")

	r := f.mustRun(t, "credential", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME HINT UPDATED" {
		t.Fatalf("list:\n%s", r.stdout)
	}
	if got := strings.Fields(lines[1]); got[0] != "openai" || got[1] != "1111" || got[2] != "2026-01-02T03:04:05Z" {
		t.Errorf("row = %v", got)
	}
	if strings.Contains(r.stdout, "sk-aaaa") {
		t.Error("list shows a value")
	}
	creds := decodeArray(t, f.mustRun(t, "credential", "list", "-o", "json").stdout)
	if len(creds) != 2 || creds[1]["name"] != "vllm" || creds[1]["hint"] != "2222" || creds[1]["updated_at"] != "2026-01-02T03:04:05Z" {
		t.Errorf("json = %v", creds)
	}

	f.mustRun(t, "credential", "delete", "openai")
	if _, ok := f.creds.value("openai"); ok {
		t.Error("not deleted")
	}
	if r := f.run(t, "credential", "delete", "openai"); r.code != 1 || r.stderr != "tollctl: credential openai not found\n" {
		t.Errorf("delete again: exit %d stderr %q", r.code, r.stderr)
	}
}
