package raftstore

import "testing"

// BenchmarkFSMCreateKeyAdmin applies key creates one after another as the
// admin API proposes them (a request id, an actor for the audit log, the
// leader's time) to a state of 1,000 keys that keeps what they leave:
// the remembered request ids and the audit records grow as in
// `e2e/bench -scale 1000 -scale-creates 2000` (run it with
// -benchtime 2000x for that).
func BenchmarkFSMCreateKeyAdmin(b *testing.B) {
	f := newFSM()
	base := bigState(1_000)
	f.state.Store(base)
	idx, i := base.Index, 0
	b.ReportAllocs()
	for b.Loop() {
		applyAdminCreates(b, f, &idx, &i, 1)
	}
}
