package admin

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// assertNoValue fails if value appears in m, in wire or JSON form.
func assertNoValue(t *testing.T, m proto.Message, value string) {
	t.Helper()
	wire, err := proto.Marshal(m)
	mustOK(t, err)
	js, err := protojson.Marshal(m)
	mustOK(t, err)
	if strings.Contains(string(wire), value) || strings.Contains(string(js), value) {
		t.Errorf("response %s contains the credential value", js)
	}
}

func TestCredentials(t *testing.T) {
	env := startServer(t, openStore(t))
	ctx := ctxT(t)
	const long, short = "sk-proj-AbCdEfGhIjKlMnOp-wxyz", "short"

	set, err := env.creds.SetCredential(ctx, &pb.SetCredentialRequest{Name: "openai", Value: long})
	mustOK(t, err)
	assertNoValue(t, set, long)
	if c := set.GetCredential(); c.GetName() != "openai" || c.GetHint() != "wxyz" || c.GetUpdatedAt() == nil {
		t.Errorf("SetCredential = %v", c)
	}
	set, err = env.creds.SetCredential(ctx, &pb.SetCredentialRequest{Name: "azure", Value: short})
	mustOK(t, err)
	assertNoValue(t, set, short)
	if set.GetCredential().GetHint() != "****" {
		t.Errorf("short value hint = %q, want ****", set.GetCredential().GetHint())
	}

	list, err := env.creds.ListCredentials(ctx, &pb.ListCredentialsRequest{})
	mustOK(t, err)
	assertNoValue(t, list, long)
	assertNoValue(t, list, short)
	if cs := list.GetCredentials(); len(cs) != 2 || cs[0].GetName() != "azure" || cs[1].GetName() != "openai" ||
		cs[1].GetHint() != "wxyz" {
		t.Errorf("ListCredentials = %v", cs)
	}

	// Overwrite keeps one entry.
	_, err = env.creds.SetCredential(ctx, &pb.SetCredentialRequest{Name: "openai", Value: long + "-v2-9999"})
	mustOK(t, err)
	list, err = env.creds.ListCredentials(ctx, &pb.ListCredentialsRequest{})
	mustOK(t, err)
	if cs := list.GetCredentials(); len(cs) != 2 || cs[1].GetHint() != "9999" {
		t.Errorf("after overwrite: %v", cs)
	}

	for name, req := range map[string]*pb.SetCredentialRequest{
		"no name":       {Value: long},
		"no value":      {Name: "x"},
		"space name":    {Name: "a b", Value: long},
		"trailing \\n":  {Name: "x", Value: long + "\n"},
		"leading space": {Name: "x", Value: " " + long},
	} {
		_, err := env.creds.SetCredential(ctx, req)
		if st := wantCode(t, err, codes.InvalidArgument); strings.Contains(st.Message(), long) {
			t.Errorf("%s: error message contains the value", name)
		}
	}

	// In use → FailedPrecondition; unused → deleted.
	_, err = env.models.AddDeployment(ctx, &pb.AddDeploymentRequest{Model: "gpt-4o", Deployment: &pb.Deployment{
		Id: "oa", Provider: "openai", UpstreamModel: "gpt-4o", Credential: "openai",
	}})
	mustOK(t, err)
	_, err = env.creds.DeleteCredential(ctx, &pb.DeleteCredentialRequest{Name: "openai"})
	st := wantCode(t, err, codes.FailedPrecondition)
	if !strings.Contains(st.Message(), "gpt-4o") {
		t.Errorf("in-use message does not name the model: %q", st.Message())
	}
	_, err = env.creds.DeleteCredential(ctx, &pb.DeleteCredentialRequest{Name: "azure"})
	mustOK(t, err)
	_, err = env.creds.DeleteCredential(ctx, &pb.DeleteCredentialRequest{Name: "azure"})
	wantCode(t, err, codes.NotFound)
	_, err = env.creds.DeleteCredential(ctx, &pb.DeleteCredentialRequest{})
	wantCode(t, err, codes.InvalidArgument)
	list, err = env.creds.ListCredentials(ctx, &pb.ListCredentialsRequest{})
	mustOK(t, err)
	if cs := list.GetCredentials(); len(cs) != 1 || cs[0].GetName() != "openai" {
		t.Errorf("after delete: %v", cs)
	}
}

func TestCredentialHint(t *testing.T) {
	for v, want := range map[string]string{
		"":                 "****",
		"abcdefghijk":      "****",
		"abcdefghijkl":     "ijkl",
		"ééééééééééé€€€€€": "€€€€",
	} {
		if got := credentialHint(v); got != want {
			t.Errorf("credentialHint(%q) = %q, want %q", v, got, want)
		}
	}
}
