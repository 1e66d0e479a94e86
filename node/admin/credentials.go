package admin

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// MetadataForwarded is the metadata key a node sets on an admin write it
// forwards to the leader (its value is the node's id). Anyone can set it:
// see forwardedByNode for what the leader trusts.
const MetadataForwarded = "x-tollgate-forwarded"

// forwardedByNode reports whether the call of ctx is a write another node
// forwarded: it carries MetadataForwarded and the actor that node vouched
// for with the cluster secret (see ForwardMetadata), and that actor is the
// caller the token authenticated. A client that sets the header itself has
// no cluster secret to sign with, so its sealed-looking values stay refused.
func forwardedByNode(ctx context.Context, st *raftstore.State) bool {
	return len(metadata.ValueFromIncomingContext(ctx, MetadataForwarded)) > 0 && vouchedActor(ctx, st, IdentityFrom(ctx)) != nil
}

// hintMinLen is the shortest value whose last characters are shown as a
// hint; shorter values would give away too much of themselves.
const hintMinLen = 12

// publicCredential returns what the API shows of a credential: never the
// value, only a hint of its last four characters.
func publicCredential(st *raftstore.State, c *pb.StoredCredential) *pb.Credential {
	if c == nil {
		return nil
	}
	hint := ""
	if v, err := st.OpenCredential(c); err == nil {
		hint = credentialHint(v)
	} else {
		hint = "(cannot open: " + err.Error() + ")"
	}
	return &pb.Credential{Name: c.GetName(), Hint: hint, UpdatedAt: c.GetUpdatedAt()}
}

func credentialHint(v string) string {
	r := []rune(v)
	if len(r) < hintMinLen {
		return "****"
	}
	return string(r[len(r)-4:])
}

// ErrSealedValue refuses a client's credential value that looks sealed:
// only nodes pass sealed values on.
func ErrSealedValue(name string) error {
	return invalid("credential %q: the value starts with %q, which marks a value sealed by a node; give the provider's own secret", name, "tgsealed:")
}

func (c credentialService) SetCredential(ctx context.Context, req *pb.SetCredentialRequest) (*pb.SetCredentialResponse, error) {
	if err := checkName("credential name", req.GetName()); err != nil {
		return nil, err
	}
	if req.GetValue() == "" {
		return nil, invalid("credential %q: value is empty", req.GetName())
	}
	if strings.TrimSpace(req.GetValue()) != req.GetValue() {
		return nil, invalid("credential %q: value starts or ends with whitespace (a trailing newline?); strip it", req.GetName())
	}
	// Sealed here, before the command enters the Raft log, unless the
	// node that forwarded the request sealed it already (with its key,
	// which this node may lack).
	st := c.s.store.State()
	value := req.GetValue()
	if raftstore.IsSealed(value) {
		if !forwardedByNode(ctx, st) {
			return nil, ErrSealedValue(req.GetName())
		}
	} else {
		var err error
		if value, err = st.SealCredential(req.GetName(), value); err != nil {
			return nil, status.Errorf(codes.Internal, "seal credential %q: %v", req.GetName(), err)
		}
	}
	cmd := &pb.Command{Op: &pb.Command_SetCredential{SetCredential: &pb.SetCredentialCommand{
		Name: req.GetName(), Value: value,
	}}}
	sc, err := applyAs[*pb.StoredCredential](ctx, c.s, cmd, false)
	if err != nil {
		return nil, err
	}
	return &pb.SetCredentialResponse{Credential: publicCredential(c.s.store.State(), sc)}, nil
}

func (c credentialService) ListCredentials(context.Context, *pb.ListCredentialsRequest) (*pb.ListCredentialsResponse, error) {
	var out []*pb.Credential
	st := c.s.store.State()
	for _, sc := range st.Credentials() {
		out = append(out, publicCredential(st, sc))
	}
	return &pb.ListCredentialsResponse{Credentials: out}, nil
}

func (c credentialService) DeleteCredential(ctx context.Context, req *pb.DeleteCredentialRequest) (*pb.DeleteCredentialResponse, error) {
	if req.GetName() == "" {
		return nil, invalid("credential name is required")
	}
	cmd := &pb.Command{Op: &pb.Command_DeleteCredential{DeleteCredential: &pb.DeleteCredentialCommand{Name: req.GetName()}}}
	if _, err := c.s.apply(ctx, cmd); err != nil {
		return nil, err
	}
	return &pb.DeleteCredentialResponse{}, nil
}
