package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// fakeStore has an empty state and fails every Apply with err.
type fakeStore struct {
	err error
	res proto.Message
}

func (f *fakeStore) State() *raftstore.State {
	// The zero State has nil maps, which read as empty.
	return &raftstore.State{}
}

func (f *fakeStore) Apply(context.Context, *pb.Command) (proto.Message, error) { return f.res, f.err }

func TestNotLeaderIsUnavailable(t *testing.T) {
	env := startServer(t, &fakeStore{err: fmt.Errorf("%w: leadership lost", raftstore.ErrNotLeader)})
	_, err := env.keys.CreateKey(ctxT(t), &pb.CreateKeyRequest{Name: "a"})
	st := wantCode(t, err, codes.Unavailable)
	if !strings.Contains(st.Message(), "not the leader") {
		t.Errorf("message = %q", st.Message())
	}
	_, err = env.creds.SetCredential(ctxT(t), &pb.SetCredentialRequest{Name: "a", Value: "b"})
	wantCode(t, err, codes.Unavailable)
}

func TestStoreErrorCodes(t *testing.T) {
	cases := []struct {
		err  error
		want codes.Code
	}{
		{fmt.Errorf("key %q: %w", "key_1", raftstore.ErrNotFound), codes.NotFound},
		{fmt.Errorf("x: %w", raftstore.ErrAlreadyExists), codes.AlreadyExists},
		{fmt.Errorf("x: %w", raftstore.ErrInvalid), codes.InvalidArgument},
		{fmt.Errorf("x: %w", raftstore.ErrFailedPrecondition), codes.FailedPrecondition},
		{raftstore.ErrNotLeader, codes.Unavailable},
		{raftstore.ErrClosed, codes.Unavailable},
		{fmt.Errorf("raftstore: apply: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{errors.New("disk on fire"), codes.Internal},
	}
	for _, c := range cases {
		env := startServer(t, &fakeStore{err: c.err})
		_, err := env.models.DeleteModel(ctxT(t), &pb.DeleteModelRequest{Model: "m"})
		st := wantCode(t, err, c.want)
		if c.want == codes.NotFound && !strings.Contains(st.Message(), "key_1") {
			t.Errorf("message lost the detail: %q", st.Message())
		}
	}
}

func TestUnexpectedResultIsInternal(t *testing.T) {
	env := startServer(t, &fakeStore{res: &pb.ModelRoute{}})
	_, err := env.keys.CreateKey(ctxT(t), &pb.CreateKeyRequest{Name: "a"})
	wantCode(t, err, codes.Internal)
}

type fakeServerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (f fakeServerStream) Context() context.Context { return f.ctx }

func TestStreamInterceptor(t *testing.T) {
	srv := New(Config{Store: &fakeStore{}, BootstrapToken: testBootstrapToken})
	icpt := srv.StreamInterceptor()
	info := &grpc.StreamServerInfo{FullMethod: pb.KeyService_ListKeys_FullMethodName}
	called := false
	handler := func(_ any, ss grpc.ServerStream) error {
		called = IdentityFrom(ss.Context()) != nil
		return nil
	}

	err := icpt(nil, fakeServerStream{ctx: incoming(context.Background(), "")}, info, handler)
	wantCode(t, err, codes.Unauthenticated)
	err = icpt(nil, fakeServerStream{ctx: incoming(context.Background(), "Bearer nope")}, info, handler)
	wantCode(t, err, codes.Unauthenticated)
	if called {
		t.Fatal("handler ran without a valid token")
	}
	mustOK(t, icpt(nil, fakeServerStream{ctx: incoming(context.Background(), "Bearer "+testBootstrapToken)}, info, handler))
	if !called {
		t.Error("handler not called with a valid token, or without the caller in its context")
	}
	// A method without an access rule is refused to everyone.
	called = false
	err = icpt(nil, fakeServerStream{ctx: incoming(context.Background(), "Bearer "+testBootstrapToken)},
		&grpc.StreamServerInfo{FullMethod: "/tollgate.v1.Test/Stream"}, handler)
	wantCode(t, err, codes.PermissionDenied)
	if called {
		t.Error("handler ran for a method without an access rule")
	}
}
