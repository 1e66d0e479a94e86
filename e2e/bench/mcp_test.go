package main

import "testing"

// The added latency of a target is taken against direct in the same round
// and protocol, and the medians are over the rounds.
func TestSummarizeMCPAddsAgainstDirectOfTheSameRound(t *testing.T) {
	rounds := []*MCPRound{
		{Round: 1, Protocol: "p", Target: "direct", P50us: 100, P90us: 150, P99us: 300},
		{Round: 1, Protocol: "p", Target: "tollgate", P50us: 150, P90us: 250, P99us: 400},
		{Round: 2, Protocol: "p", Target: "direct", P50us: 300, P90us: 350, P99us: 900},
		{Round: 2, Protocol: "p", Target: "tollgate", P50us: 330, P90us: 390, P99us: 1200},
		{Round: 3, Protocol: "p", Target: "direct", P50us: 200, P90us: 250, P99us: 500},
		{Round: 3, Protocol: "p", Target: "tollgate", P50us: 220, P90us: 300, P99us: 500},
	}
	s := summarizeMCP(rounds)
	if len(s) != 2 || s[0].Target != "direct" || s[1].Target != "tollgate" {
		t.Fatalf("summary %+v", s)
	}
	g := s[1]
	if g.P50us != 220 || g.AddedP50us != 30 || g.AddedP90us != 50 || g.AddedP99us != 100 {
		t.Fatalf("tollgate %+v", g)
	}
	if d := s[0]; d.P50us != 200 || d.AddedP50us != 0 {
		t.Fatalf("direct %+v", d)
	}
}
