package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// clients bundles the admin API stubs over one connection.
type clients struct {
	keys   tollgatev1.KeyServiceClient
	models tollgatev1.ModelServiceClient
	creds  tollgatev1.CredentialServiceClient
}

// api opens the connection on first use. The connection is lazy: nothing is
// dialed until the first call, so connection failures surface as call errors.
func (a *app) api() (*clients, error) {
	if a.conn == nil {
		conn, err := grpc.NewClient(a.addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(bearerToken(a.token)),
			grpc.WithUserAgent("tollctl/"+buildVersion()),
		)
		if err != nil {
			return nil, fmt.Errorf("invalid --addr %q: %v", a.addr, err)
		}
		a.conn = conn
	}
	return &clients{
		keys:   tollgatev1.NewKeyServiceClient(a.conn),
		models: tollgatev1.NewModelServiceClient(a.conn),
		creds:  tollgatev1.NewCredentialServiceClient(a.conn),
	}, nil
}

// callContext bounds the whole command by --timeout.
func (a *app) callContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), a.timeout)
}

// bearerToken sends "authorization: Bearer <token>" on every call. It is
// allowed over plaintext connections because the admin API is meant for
// loopback and private networks until TLS support lands.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if t == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return false }

// describe turns an error into the message shown after "tollctl: ",
// using the gRPC status message and adding a hint for common failures.
func (a *app) describe(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unauthenticated:
		if a.token == "" {
			return msg + "\nhint: no admin token given; set TOLLGATE_TOKEN or pass --token"
		}
		return msg + "\nhint: the admin token was rejected; check TOLLGATE_TOKEN or --token"
	case codes.PermissionDenied:
		return msg + "\nhint: the admin token is not allowed to do this"
	case codes.Unavailable:
		return fmt.Sprintf("cannot reach tollgate at %s: %s\nhint: is tollgate running? check --addr or TOLLGATE_ADDR", a.addr, msg)
	case codes.DeadlineExceeded:
		return fmt.Sprintf("no answer from tollgate at %s within %s: %s\nhint: is tollgate running and is --addr right? raise --timeout for slow links", a.addr, a.timeout, msg)
	case codes.Unimplemented:
		return fmt.Sprintf("%s\nhint: %s does not offer this call; is --addr the Tollgate admin gRPC address, and is tollgate up to date?", msg, a.addr)
	}
	return msg
}
