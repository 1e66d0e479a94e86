package raftstore

import (
	"errors"

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
	id    string
	nanos int64
	value proto.Message
	err   error
}

func requestAgeKey(nanos int64, id string) []byte {
	return append(orderedInt64(make([]byte, 0, 8+len(id)), nanos), id...)
}

// appliedRequest returns the remembered result of request id, if it was
// applied no longer than the maximum age before now.
func (s *State) appliedRequest(id string, now int64) (*applyResult, bool) {
	if id == "" {
		return nil, false
	}
	v, ok := s.requests.Get([]byte(id))
	if !ok {
		return nil, false
	}
	r := v.(*appliedReq)
	if now-r.nanos > appliedRequestMaxAge {
		return nil, false
	}
	return &applyResult{value: r.value, err: r.err}, true
}

// rememberRequest records the result of request id, applied at nanos, in
// s, which must not be published yet, and forgets the oldest ids beyond
// the bounds.
func (s *State) rememberRequest(id string, nanos int64, res *applyResult) {
	byID, byAge := s.requests.Txn(), s.requestsByAge.Txn()
	count := s.requests.Len() + 1
	if v, ok := byID.Get([]byte(id)); ok { // expired and applied again
		byAge.Delete(requestAgeKey(v.(*appliedReq).nanos, id))
		count--
	}
	byID.Insert([]byte(id), &appliedReq{id: id, nanos: nanos, value: res.value, err: res.err})
	byAge.Insert(requestAgeKey(nanos, id), id)
	for range expireStep + 1 {
		k, v, ok := byAge.Root().Iterator().Next()
		if !ok || (count <= maxAppliedRequests && nanos-decodeOrderedInt64(k) <= appliedRequestMaxAge) {
			break
		}
		byAge.Delete(k)
		byID.Delete([]byte(v.(string)))
		count--
	}
	s.requests, s.requestsByAge = byID.CommitOnly(), byAge.CommitOnly()
}

// appliedRequestsOf lists the remembered requests oldest first, for a
// snapshot.
func appliedRequestsOf(s *State) []*pb.AppliedRequest {
	var out []*pb.AppliedRequest
	it := s.requestsByAge.Root().Iterator()
	for _, v, ok := it.Next(); ok; _, v, ok = it.Next() {
		r, _ := s.requests.Get([]byte(v.(string)))
		out = append(out, appliedRequestToProto(r.(*appliedReq)))
	}
	return out
}

func appliedRequestToProto(r *appliedReq) *pb.AppliedRequest {
	p := &pb.AppliedRequest{Id: r.id, UnixNanos: r.nanos}
	if r.value != nil {
		p.ResultType = string(r.value.ProtoReflect().Descriptor().FullName())
		p.Result, _ = proto.MarshalOptions{Deterministic: true}.Marshal(r.value)
	}
	if r.err != nil {
		p.Error = r.err.Error()
		for kind, sentinel := range errorKinds {
			if errors.Is(r.err, sentinel) {
				p.ErrorKind = kind
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
	r := &appliedReq{id: p.GetId(), nanos: p.GetUnixNanos()}
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
	byID, byAge := s.requests.Txn(), s.requestsByAge.Txn()
	for _, p := range reqs {
		if p.GetId() == "" {
			continue
		}
		r := appliedRequestFromProto(p)
		if v, ok := byID.Get([]byte(r.id)); ok {
			byAge.Delete(requestAgeKey(v.(*appliedReq).nanos, r.id))
		}
		byID.Insert([]byte(r.id), r)
		byAge.Insert(requestAgeKey(r.nanos, r.id), r.id)
	}
	s.requests, s.requestsByAge = byID.CommitOnly(), byAge.CommitOnly()
}
