package main

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func TestRetriedWritesKeepRequestIDAndSecretSeed(t *testing.T) {
	f := startFake(t)
	m := tollgatev1.KeyService_CreateKey_FullMethodName
	f.inject.failNext(m, status.Error(codes.Unavailable, "this node is not the leader; retry"),
		status.Error(codes.Unavailable, "forwarding to the leader at 127.0.0.1:1: connection refused"))
	f.mustRun(t, "key", "create", "--name", "svc")
	calls := f.inject.seenCalls(m)
	if len(calls) != 3 {
		t.Fatalf("server saw %d CreateKey calls, want 3", len(calls))
	}
	first := calls[0].req.(*tollgatev1.CreateKeyRequest)
	if calls[0].requestID == "" || len(first.GetSecretSeed()) != secretSeedLen {
		t.Fatalf("first attempt: request id %q, seed of %d bytes", calls[0].requestID, len(first.GetSecretSeed()))
	}
	for i, c := range calls[1:] {
		if c.requestID != calls[0].requestID || !bytes.Equal(c.req.(*tollgatev1.CreateKeyRequest).GetSecretSeed(), first.GetSecretSeed()) {
			t.Errorf("attempt %d: request id %q and seed differ from the first attempt's", i+2, c.requestID)
		}
	}

	// Another invocation is another request.
	f.mustRun(t, "key", "create", "--name", "svc2")
	again := f.inject.seenCalls(m)[3]
	if again.requestID == calls[0].requestID || bytes.Equal(again.req.(*tollgatev1.CreateKeyRequest).GetSecretSeed(), first.GetSecretSeed()) {
		t.Error("a second invocation reused the first one's request id or seed")
	}
}

func TestRotateSendsSecretSeed(t *testing.T) {
	f := startFake(t)
	f.mustRun(t, "key", "create", "--name", "svc")
	f.mustRun(t, "key", "rotate", "key_0001")
	calls := f.inject.seenCalls(tollgatev1.KeyService_RotateKey_FullMethodName)
	if len(calls) != 1 || len(calls[0].req.(*tollgatev1.RotateKeyRequest).GetSecretSeed()) != secretSeedLen || calls[0].requestID == "" {
		t.Fatalf("rotate calls: %v", calls)
	}
}

// A node in a minority partition answers "no leader:" at once; tollctl
// retries that only briefly (a load balancer may pick a node on the
// majority side), not until --timeout.
func TestNoLeaderAnswerEndsRetriesEarly(t *testing.T) {
	f := startFake(t)
	f.inject.failAlways(mStatus, status.Error(codes.Unavailable, "no leader: this node reaches 1 of the 3 voters, too few to elect one"))
	r := f.run(t, "--timeout", "5m", "cluster", "status")
	if r.code != 1 || !strings.Contains(r.stderr, "no leader: this node reaches 1 of the 3 voters") || !strings.Contains(r.stderr, "hint: a majority") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if n := f.inject.count(mStatus); n < 2 || n > 8 {
		t.Errorf("server saw %d Status calls, want a few retries within %v", n, noLeaderRetry)
	}
}
