package admin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/raftstore"
)

// toStatus maps an error from the store to a gRPC status. The store's
// messages name the key, model or credential concerned, so they are kept.
func (s *Server) toStatus(ctx context.Context, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	msg := err.Error()
	switch {
	case errors.Is(err, raftstore.ErrNotFound):
		return status.Error(codes.NotFound, msg)
	case errors.Is(err, raftstore.ErrAlreadyExists):
		return status.Error(codes.AlreadyExists, msg)
	case errors.Is(err, raftstore.ErrInvalid):
		return status.Error(codes.InvalidArgument, msg)
	case errors.Is(err, raftstore.ErrFailedPrecondition), errors.Is(err, raftstore.ErrCommandRefused):
		return status.Error(codes.FailedPrecondition, msg)
	case errors.Is(err, raftstore.ErrNotLeader):
		return status.Error(codes.Unavailable, "this node is not the leader; retry")
	case errors.Is(err, raftstore.ErrClosed):
		return status.Error(codes.Unavailable, "this node is shutting down; retry")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, msg)
	}
	s.log.ErrorContext(ctx, "admin: store error", "err", msg)
	return status.Error(codes.Internal, "internal error: "+msg)
}

// invalid returns an InvalidArgument status.
func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}
