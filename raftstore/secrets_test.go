package raftstore

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func testSealer(t *testing.T, fill byte) *Sealer {
	t.Helper()
	s, err := NewSealer(bytes.Repeat([]byte{fill}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealerRoundTripAndRefusals(t *testing.T) {
	s, other := testSealer(t, 1), testSealer(t, 2)
	const v = "sk-the-secret-value"
	a, err := s.Seal("openai", v)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Seal("openai", v)
	if !IsSealed(a) || strings.Contains(a, v) || a == b {
		t.Fatalf("sealed %q / %q: want sealed, without the value, with a fresh nonce each", a, b)
	}
	if got, err := s.Open("openai", a); err != nil || got != v {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if got, err := s.Open("openai", v); err != nil || got != v {
		t.Errorf("a value stored in the clear opens as itself: %q, %v", got, err)
	}
	var none *Sealer
	if got, err := none.Open("openai", v); err != nil || got != v {
		t.Errorf("nil sealer, clear value: %q, %v", got, err)
	}
	flipped := []byte(a)
	flipped[len(flipped)-3] ^= 1
	if flipped[len(flipped)-3] == a[len(a)-3] {
		t.Fatal("no flip")
	}
	for _, c := range []struct {
		name   string
		sealer *Sealer
		cred   string
		stored string
		want   string
	}{
		{"another credential's name", s, "anthropic", a, "does not open"},
		{"tampered", s, "openai", string(flipped), ""},
		{"another key", other, "openai", a, "this node's key is " + other.KeyID()},
		{"no key", nil, "openai", a, "no secrets key"},
		{"malformed", s, "openai", sealedPrefix + "abc", "malformed"},
	} {
		if _, err := c.sealer.Open(c.cred, c.stored); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := NewSealer(make([]byte, 16)); err == nil {
		t.Error("NewSealer took a 16-byte key")
	}
}

// The data plane's route views carry the opened value; snapshots keep the
// sealed one; a state restored without the key marks the deployment
// instead of handing out the sealed text.
func TestSealedCredentialInState(t *testing.T) {
	s := testSealer(t, 7)
	h := &harness{t: t, f: newSealedFSM(s), now: baseNanos - 1e9}
	const v = "sk-route-secret"
	sealed, err := h.state().SealCredential("up", v)
	if err != nil {
		t.Fatal(err)
	}
	h.must(&pb.Command{Op: &pb.Command_SetCredential{SetCredential: &pb.SetCredentialCommand{Name: "up", Value: sealed}}},
		&pb.Command{Op: &pb.Command_AddDeployment{AddDeployment: &pb.AddDeploymentCommand{Route: "m",
			Deployment: &pb.Deployment{Id: "d", Provider: "openai", UpstreamModel: "x", Credential: "up"}}}})
	if d := h.state().Route("m").Deployments[0]; d.Credential != v || d.CredentialError != "" {
		t.Fatalf("deployment credential %q, error %q", d.Credential, d.CredentialError)
	}
	data := persist(t, h.f)
	if bytes.Contains(data, []byte(v)) {
		t.Error("the snapshot holds the clear value")
	}
	for _, c := range []struct {
		name   string
		sealer *Sealer
		ok     bool
	}{{"same key", s, true}, {"no key", nil, false}, {"another key", testSealer(t, 8), false}} {
		f := newSealedFSM(c.sealer)
		if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatalf("%s: Restore: %v", c.name, err)
		}
		d := f.state.Load().Route("m").Deployments[0]
		if c.ok != (d.Credential == v && d.CredentialError == "") || (!c.ok && (d.Credential != "" || !strings.Contains(d.CredentialError, `credential "up"`))) {
			t.Errorf("%s: credential %q, error %q", c.name, d.Credential, d.CredentialError)
		}
		// Restoring a snapshot through the log keeps the node's sealer.
		h2 := &harness{t: t, f: newSealedFSM(c.sealer), now: baseNanos}
		h2.must(&pb.Command{Op: &pb.Command_Restore{Restore: &pb.RestoreCommand{Snapshot: f.state.Load().Snapshot()}}})
		if d := h2.state().Route("m").Deployments[0]; c.ok != (d.Credential == v) {
			t.Errorf("%s: after a restore command: credential %q, error %q", c.name, d.Credential, d.CredentialError)
		}
	}
}

// A reseal applies only while the stored value is the one it read, and
// keeps the credential's updated_at; a set or delete in between wins.
func TestResealIsConditional(t *testing.T) {
	s := testSealer(t, 3)
	h := &harness{t: t, f: newSealedFSM(s), now: baseNanos - 1e9}
	set := func(name, value, of string) error {
		_, err := h.apply(&pb.Command{Op: &pb.Command_SetCredential{SetCredential: &pb.SetCredentialCommand{Name: name, Value: value, ResealOf: of}}})
		return err
	}
	if err := set("a", "clear-a", ""); err != nil {
		t.Fatal(err)
	}
	if err := set("b", "clear-b", ""); err != nil {
		t.Fatal(err)
	}
	before := h.state().Credential("a").GetUpdatedAt().AsTime()
	sealedA, _ := s.Seal("a", "clear-a")
	if err := set("a", sealedA, "clear-a"); err != nil {
		t.Fatalf("reseal: %v", err)
	}
	got := h.state().Credential("a")
	if got.GetValue() != sealedA || !got.GetUpdatedAt().AsTime().Equal(before) {
		t.Errorf("after reseal: %q updated %v (was %v)", got.GetValue(), got.GetUpdatedAt().AsTime(), before)
	}
	// b is set anew before its reseal applies: the reseal must not undo it.
	if err := set("b", "newer-b", ""); err != nil {
		t.Fatal(err)
	}
	sealedB, _ := s.Seal("b", "clear-b")
	if err := set("b", sealedB, "clear-b"); !errors.Is(err, ErrFailedPrecondition) {
		t.Errorf("stale reseal: %v, want ErrFailedPrecondition", err)
	}
	if v := h.state().Credential("b").GetValue(); v != "newer-b" {
		t.Errorf("b = %q after a stale reseal, want the newer value", v)
	}
	// A deleted credential does not come back.
	h.must(&pb.Command{Op: &pb.Command_DeleteCredential{DeleteCredential: &pb.DeleteCredentialCommand{Name: "b"}}})
	if err := set("b", sealedB, "newer-b"); !errors.Is(err, ErrFailedPrecondition) || h.state().Credential("b") != nil {
		t.Errorf("reseal of a deleted credential: %v, credential %v", err, h.state().Credential("b"))
	}
}

// The cluster secret is sealed like a credential; a reseal keeps the same
// secret and applies only over the value it read; without the key it does
// not open (and the node cannot authenticate to the others).
func TestClusterSecretSealed(t *testing.T) {
	s := testSealer(t, 5)
	h := &harness{t: t, f: newSealedFSM(s), now: baseNanos - 1e9}
	const clear = "cluster-secret-0123456789abcdef"
	h.must(&pb.Command{Op: &pb.Command_SetClusterSecret{SetClusterSecret: &pb.SetClusterSecretCommand{Secret: clear}}})
	sealed, err := h.state().SealClusterSecret(clear)
	if err != nil || !IsSealed(sealed) {
		t.Fatalf("SealClusterSecret: %q, %v", sealed, err)
	}
	// A stale reseal (not over the stored value) and a plain overwrite do
	// nothing.
	h.must(&pb.Command{Op: &pb.Command_SetClusterSecret{SetClusterSecret: &pb.SetClusterSecretCommand{Secret: sealed, ResealOf: "other"}}},
		&pb.Command{Op: &pb.Command_SetClusterSecret{SetClusterSecret: &pb.SetClusterSecretCommand{Secret: "another-secret-0123456789"}}})
	if h.state().StoredClusterSecret() != clear {
		t.Fatalf("stored %q after a stale reseal and an overwrite", h.state().StoredClusterSecret())
	}
	h.must(&pb.Command{Op: &pb.Command_SetClusterSecret{SetClusterSecret: &pb.SetClusterSecretCommand{Secret: sealed, ResealOf: clear}}})
	if st := h.state(); st.StoredClusterSecret() != sealed || st.ClusterSecret() != clear {
		t.Errorf("after the reseal: stored %q, opened %q", st.StoredClusterSecret(), st.ClusterSecret())
	}
	data := persist(t, h.f)
	if bytes.Contains(data, []byte(clear)) {
		t.Error("the snapshot holds the cluster secret in the clear")
	}
	f := newSealedFSM(nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if got := f.state.Load().ClusterSecret(); got != "" {
		t.Errorf("a node without the key opened the cluster secret: %q", got)
	}
	// A credential sealed value does not open as the cluster secret.
	asCred, _ := s.Seal("x", clear)
	if _, err := s.Open(clusterSecretName, asCred); err == nil {
		t.Error("a credential's sealed value opened as the cluster secret")
	}
}

// Rotation: a sealer with the old key among its old keys opens what the
// old key sealed, seals with the new one, and says what needs resealing.
func TestSealerRotation(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	oldS, _ := NewSealer(oldKey)
	rot, err := NewSealer(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	onlyNew, _ := NewSealer(newKey)
	v, _ := oldS.Seal("c", "secret")
	if got, err := rot.Open("c", v); err != nil || got != "secret" {
		t.Fatalf("rotating sealer opens the old key's value: %q, %v", got, err)
	}
	if _, err := onlyNew.Open("c", v); err == nil || !strings.Contains(err.Error(), "TOLLGATE_SECRETS_OLD_KEYS") {
		t.Errorf("without the old key: %v", err)
	}
	nv, _ := rot.Seal("c", "secret")
	if !rot.Current(nv) || rot.Current(v) || rot.Current("secret") {
		t.Error("Current is wrong")
	}
	st := &State{sealer: rot}
	if !st.NeedsSeal("c", v) || !st.NeedsSeal("c", "secret") || st.NeedsSeal("c", nv) {
		t.Error("NeedsSeal is wrong")
	}
	foreign, _ := testSealer(t, 9).Seal("c", "x")
	if st.NeedsSeal("c", foreign) {
		t.Error("a value that does not open here would be resealed")
	}
	if _, err := NewSealer(newKey, []byte("short")); err == nil {
		t.Error("a short old key was taken")
	}
}
