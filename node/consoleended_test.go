package node

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/tollgate/tollgate/node/admin"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// callAs calls fullMethod on conn with an empty request and the
// authorization auth, and returns its error (streams too: the first
// message's).
func callAs(t *testing.T, conn *grpc.ClientConn, auth, fullMethod string, streams bool) error {
	t.Helper()
	md := methodDescriptor(t, fullMethod)
	in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		t.Fatalf("%s: %v", fullMethod, err)
	}
	out, err := newResponse(fullMethod)
	if err != nil {
		t.Fatalf("%s: %v", fullMethod, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", auth)
	if !streams {
		return conn.Invoke(ctx, fullMethod, in.New().Interface(), out)
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient()}, fullMethod)
	if err != nil {
		return err
	}
	if err := s.SendMsg(in.New().Interface()); err != nil {
		return s.RecvMsg(out) // the stream's own error
	}
	_ = s.CloseSend()
	return s.RecvMsg(out)
}

// A logged-out console session opens for nothing but its own logout, on
// any node: every RPC the admin server serves (writes forwarded to the
// leader, reads, streams, the nodes' own plumbing), asked of the leader or
// of a follower with a saved copy of the cookie, is refused as logged
// out; only EndConsoleSession succeeds again (it writes nothing). A
// session that opened for more than the logout would undo the logout.
func TestAnEndedConsoleSessionOpensNoRPCButItsLogoutOnAnyNode(t *testing.T) {
	nodes, leader := startConsoleCluster(t)
	follower := without(nodes, leader)[0]
	base := "http://" + follower.n.ConsoleAddr()
	hc, csrf := consoleLogin(t, base, testAdminToken)
	u, _ := url.Parse(base)
	auth := admin.ConsoleScheme + " " + hc.Jar.Cookies(u)[0].Value
	if resp, body := consolePost(t, hc, base+"/api/logout", "", csrf); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %d %s", resp.StatusCode, body)
	}
	served := servedMethods(t)
	for _, tn := range []*tnode{leader, follower} {
		for method, streams := range served {
			err := callAs(t, tn.grpcConn(), auth, method, streams)
			if method == pb.UserService_EndConsoleSession_FullMethodName {
				if err != nil {
					t.Errorf("%s on %s with the ended session: %v, want it to succeed again", method, tn.cfg.NodeID, err)
				}
				continue
			}
			if st := status.Convert(err); st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), "logged out") {
				t.Errorf("%s on %s with the ended session: %v, want Unauthenticated (logged out)", method, tn.cfg.NodeID, err)
			}
		}
	}
}
