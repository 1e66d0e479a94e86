package raftstore

import (
	"errors"
	"slices"
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func setRouteOptionsCmd(route string, o *pb.RouteOptions) *pb.Command {
	return &pb.Command{Op: &pb.Command_SetRouteOptions{SetRouteOptions: &pb.SetRouteOptionsCommand{Route: route, Options: o}}}
}

// Resolve: exact names win over aliases, aliases over wildcards, and the
// most specific wildcard wins.
func TestResolveAliasesAndWildcards(t *testing.T) {
	h := newHarness(t)
	h.must(
		addDeploymentCmd("claude-*", dep("a", "anthropic", "")),
		addDeploymentCmd("claude-3-*", dep("b", "anthropic", "")),
		addDeploymentCmd("*", dep("c", "openai", "")),
		addDeploymentCmd("claude-3-opus", dep("d", "anthropic", "")),
		addDeploymentCmd("gpt-4o", dep("e", "openai", "")),
		setRouteOptionsCmd("gpt-4o", &pb.RouteOptions{Aliases: []string{"default", "claude-3-haiku"},
			Strategy: "latency", Fallbacks: []string{"claude-3-opus"}, MaxAttempts: 3}),
	)
	st := h.state()
	for name, want := range map[string]string{
		"claude-3-opus":   "claude-3-opus", // exact
		"claude-3-haiku":  "gpt-4o",        // alias beats the wildcard
		"default":         "gpt-4o",
		"claude-3-sonnet": "claude-3-*", // more specific wildcard
		"claude-sonnet-4": "claude-*",
		"mistral-large":   "*",
	} {
		r := st.Resolve(name)
		if r == nil || r.Name != want {
			t.Errorf("Resolve(%q) = %v, want route %q", name, r, want)
		}
	}
	r := st.Route("gpt-4o")
	if r.Strategy != "latency" || !slices.Equal(r.Fallbacks, []string{"claude-3-opus"}) || r.MaxAttempts != 3 || r.Wildcard {
		t.Errorf("route view = %+v", r)
	}
	if !st.Route("claude-*").Wildcard {
		t.Error("claude-* is not marked a wildcard")
	}
	// The options survive a snapshot round trip.
	h2 := newHarness(t)
	h2.must(&pb.Command{Op: &pb.Command_Restore{Restore: &pb.RestoreCommand{Snapshot: st.Snapshot()}}})
	if r := h2.state().Resolve("default"); r == nil || r.Name != "gpt-4o" || r.Strategy != "latency" {
		t.Errorf("after restore Resolve(default) = %+v", r)
	}
}

func TestSetRouteOptionsValidation(t *testing.T) {
	h := newHarness(t)
	h.must(
		addDeploymentCmd("a", dep("x", "openai", "")),
		addDeploymentCmd("b", dep("y", "openai", "")),
		setRouteOptionsCmd("a", &pb.RouteOptions{Aliases: []string{"taken"}}),
	)
	for name, tc := range map[string]struct {
		route string
		o     *pb.RouteOptions
		want  error
	}{
		"unknown route":     {"nope", &pb.RouteOptions{}, ErrNotFound},
		"unknown strategy":  {"a", &pb.RouteOptions{Strategy: "fastest"}, ErrInvalid},
		"self fallback":     {"a", &pb.RouteOptions{Fallbacks: []string{"a"}}, ErrInvalid},
		"empty fallback":    {"a", &pb.RouteOptions{ContextFallbacks: []string{""}}, ErrInvalid},
		"alias is a route":  {"a", &pb.RouteOptions{Aliases: []string{"b"}}, ErrInvalid},
		"alias of another":  {"b", &pb.RouteOptions{Aliases: []string{"taken"}}, ErrAlreadyExists},
		"wildcard alias":    {"b", &pb.RouteOptions{Aliases: []string{"b-*"}}, ErrInvalid},
		"too many attempts": {"a", &pb.RouteOptions{MaxAttempts: 11}, ErrInvalid},
		"alias is own name": {"a", &pb.RouteOptions{Aliases: []string{"a"}}, ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			before := contentBytes(t, h.state())
			_, err := h.apply(setRouteOptionsCmd(tc.route, tc.o))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if string(before) != string(contentBytes(t, h.state())) {
				t.Error("a refused command changed the state")
			}
		})
	}
	// Re-setting the own alias is fine; clearing all options stores none.
	if _, err := h.apply(setRouteOptionsCmd("a", &pb.RouteOptions{Aliases: []string{"taken"}})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.apply(setRouteOptionsCmd("a", &pb.RouteOptions{})); err != nil {
		t.Fatal(err)
	}
	if o := h.state().RouteConfig("a").GetOptions(); o != nil {
		t.Errorf("options after clearing = %v, want none", o)
	}
	if h.state().Resolve("taken") != nil {
		t.Error("a cleared alias still resolves")
	}
}
