package raftstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// A command with a request id is applied once: the state remembers the
// ids it applied recently with their results, and a command whose id it
// remembers returns that result again and changes nothing. So a client
// that retries a write after an election (not knowing whether the first
// attempt committed) never creates a second key or team.
//
// The memory is bounded by count and by age; the age runs on the
// commands' own (leader-stamped) times, never on a clock, so every replica
// forgets the same ids at the same entry.
var maxAppliedRequests = 20_000 // a variable for tests

const (
	appliedRequestMaxAge = 15 * 60 * 1e9 // nanoseconds
	// expireStep bounds the ids forgotten for age by one entry.
	expireStep = 8
)

type appliedReq struct {
	id          string
	nanos       int64
	value       proto.Message
	err         error
	fingerprint []byte // commandFingerprint of the command; nil if unknown
}

// commandFingerprint identifies what a command does, apart from when it
// was proposed and under which request id: a retry of a write has the
// same fingerprint, another write under a reused id does not.
//
// It marshals cmd itself with those fields (and the actor) cleared for the
// moment (the same bytes as a cleared copy, without copying a command that
// may carry thousands of keys), so cmd must not be read concurrently.
func commandFingerprint(cmd *pb.Command) []byte {
	nanos, rid, actor := cmd.UnixNanos, cmd.RequestId, cmd.Actor
	cmd.UnixNanos, cmd.RequestId, cmd.Actor = 0, "", nil // a retry may come through another node
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(cmd)
	cmd.UnixNanos, cmd.RequestId, cmd.Actor = nanos, rid, actor
	h := sha256.Sum256(b)
	return h[:]
}

// appliedRequest returns the remembered result of request id, if it was
// applied no longer than the maximum age before now. A remembered id whose
// command had another fingerprint than fp answers ErrAlreadyExists: the id
// was reused for another write, which is not applied.
func (s *State) appliedRequest(id string, now int64, fp []byte) (*applyResult, bool) {
	if id == "" {
		return nil, false
	}
	it, ok := s.requests.get(named[*appliedReq]{k: id})
	if !ok || now-it.v.nanos > appliedRequestMaxAge {
		return nil, false
	}
	if it.v.fingerprint != nil && !bytes.Equal(it.v.fingerprint, fp) {
		return &applyResult{err: fmt.Errorf("request id %q was used by another write a moment ago: %w", id, ErrAlreadyExists)}, true
	}
	return &applyResult{value: it.v.value, err: it.v.err}, true
}

// rememberRequest records the result of request id, applied at nanos, in
// s, which must not be published yet, and forgets the oldest ids beyond
// the bounds.
func (s *State) rememberRequest(id string, nanos int64, fp []byte, res *applyResult) {
	byID, byAge := s.requests.txn(), s.requestsByAge.txn()
	putRequest(byID, byAge, &appliedReq{id: id, nanos: nanos, value: res.value, err: res.err, fingerprint: fp})
	for range expireStep + 1 {
		oldest, ok := byAge.min()
		if !ok || (byID.Len() <= maxAppliedRequests && nanos-oldest.nanos <= appliedRequestMaxAge) {
			break
		}
		byAge.delete(oldest)
		byID.delete(named[*appliedReq]{k: oldest.id})
	}
	s.requests, s.requestsByAge = byID.commit(), byAge.commit()
}

func putRequest(byID *ptxn[named[*appliedReq]], byAge *ptxn[ageItem], r *appliedReq) {
	if old, ok := byID.put(named[*appliedReq]{r.id, r}); ok {
		byAge.delete(ageItem{old.v.nanos, r.id})
	}
	byAge.put(ageItem{r.nanos, r.id})
}

// appliedRequestsOf lists the remembered requests oldest first, for a
// snapshot.
func appliedRequestsOf(s *State) []*pb.AppliedRequest {
	var out []*pb.AppliedRequest
	s.requestsByAge.ascend(func(a ageItem) bool {
		r, _ := s.requests.get(named[*appliedReq]{k: a.id})
		out = append(out, appliedRequestToProto(r.v))
		return true
	})
	return out
}

func appliedRequestToProto(r *appliedReq) *pb.AppliedRequest {
	p := &pb.AppliedRequest{Id: r.id, UnixNanos: r.nanos, Fingerprint: r.fingerprint}
	if r.value != nil {
		p.ResultType = string(r.value.ProtoReflect().Descriptor().FullName())
		p.Result, _ = proto.MarshalOptions{Deterministic: true}.Marshal(r.value)
	}
	if r.err != nil {
		p.Error = r.err.Error()
		for _, kind := range []pb.ErrorKind{pb.ErrorKind_ERROR_KIND_NOT_FOUND, pb.ErrorKind_ERROR_KIND_ALREADY_EXISTS,
			pb.ErrorKind_ERROR_KIND_INVALID, pb.ErrorKind_ERROR_KIND_FAILED_PRECONDITION} { // a fixed order: deterministic
			if errors.Is(r.err, errorKinds[kind]) {
				p.ErrorKind = kind
				break
			}
		}
	}
	return p
}

var errorKinds = map[pb.ErrorKind]error{
	pb.ErrorKind_ERROR_KIND_NOT_FOUND:           ErrNotFound,
	pb.ErrorKind_ERROR_KIND_ALREADY_EXISTS:      ErrAlreadyExists,
	pb.ErrorKind_ERROR_KIND_INVALID:             ErrInvalid,
	pb.ErrorKind_ERROR_KIND_FAILED_PRECONDITION: ErrFailedPrecondition,
}

// appliedError is a remembered error read back from a snapshot: the same
// message, wrapping the same sentinel.
type appliedError struct {
	msg  string
	kind error
}

func (e *appliedError) Error() string { return e.msg }
func (e *appliedError) Unwrap() error { return e.kind }

func appliedRequestFromProto(p *pb.AppliedRequest) *appliedReq {
	r := &appliedReq{id: p.GetId(), nanos: p.GetUnixNanos(), fingerprint: p.GetFingerprint()}
	if p.GetResultType() != "" {
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(p.GetResultType())); err == nil {
			m := mt.New().Interface()
			if proto.Unmarshal(p.GetResult(), m) == nil {
				r.value = m
			}
		}
	}
	if p.GetError() != "" {
		r.err = &appliedError{msg: p.GetError(), kind: errorKinds[p.GetErrorKind()]}
	}
	return r
}

// putAppliedRequests loads remembered requests into s (not yet published).
func (s *State) putAppliedRequests(reqs []*pb.AppliedRequest) {
	byID, byAge := s.requests.txn(), s.requestsByAge.txn()
	for _, p := range reqs {
		if p.GetId() != "" {
			putRequest(byID, byAge, appliedRequestFromProto(p))
		}
	}
	s.requests, s.requestsByAge = byID.commit(), byAge.commit()
}
