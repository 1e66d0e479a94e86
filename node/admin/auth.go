package admin

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/raftstore"
)

const (
	msgMissingToken = "missing admin token: pass --token or set TOLLGATE_TOKEN"
	msgInvalidToken = "invalid admin token"
)

// UnaryInterceptor checks the admin bearer token on every call and logs
// failed calls (never the token).
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := s.authenticate(ctx); err != nil {
			s.logFailure(ctx, info.FullMethod, err)
			return nil, err
		}
		resp, err := handler(ctx, req)
		if err != nil {
			s.logFailure(ctx, info.FullMethod, err)
		}
		return resp, err
	}
}

// StreamInterceptor checks the admin bearer token on every stream, like
// UnaryInterceptor.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		if err := s.authenticate(ctx); err != nil {
			s.logFailure(ctx, info.FullMethod, err)
			return err
		}
		err := handler(srv, ss)
		if err != nil {
			s.logFailure(ctx, info.FullMethod, err)
		}
		return err
	}
}

// authenticate accepts "authorization: Bearer <token>" when the token's
// SHA-256 is registered in the replicated state or the token equals the
// bootstrap token.
func (s *Server) authenticate(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 || strings.TrimSpace(vals[0]) == "" {
		return status.Error(codes.Unauthenticated, msgMissingToken)
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return status.Error(codes.Unauthenticated, msgInvalidToken+`: the authorization metadata must be "Bearer <token>"`)
	}
	h := raftstore.HashSecret(token)
	// Comparing hashes keeps the comparison constant-time in the token's
	// length too.
	if s.hasBoot && subtle.ConstantTimeCompare(h[:], s.bootstrap[:]) == 1 {
		return nil
	}
	if st := s.store.State(); st != nil {
		if st.HasAdminToken(h) {
			return nil
		}
		// Nodes call each other with the replicated cluster secret.
		if cs := st.ClusterSecret(); cs != "" {
			ch := raftstore.HashSecret(cs)
			if subtle.ConstantTimeCompare(h[:], ch[:]) == 1 {
				return nil
			}
		}
	}
	return status.Error(codes.Unauthenticated, msgInvalidToken)
}

// logFailure logs a failed call: server-side failures as errors or
// warnings, rejected tokens as warnings, caller mistakes as info.
func (s *Server) logFailure(ctx context.Context, method string, err error) {
	st := status.Convert(err)
	level := slog.LevelInfo
	switch st.Code() {
	case codes.Internal, codes.Unknown, codes.DataLoss:
		level = slog.LevelError
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unavailable:
		level = slog.LevelWarn
	}
	attrs := []any{"method", method, "code", st.Code().String(), "error", st.Message()}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		attrs = append(attrs, "peer", p.Addr.String())
	}
	s.log.Log(ctx, level, "admin call failed", attrs...)
}
