package node

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// servedMethods returns every RPC the admin gRPC server of a real node serves, by full
// method name, with whether it streams.
func servedMethods(t *testing.T) map[string]bool {
	t.Helper()
	tn := newTNode(t, baseConfig(t, "rpcs", testLogger(t)))
	served := map[string]bool{}
	for svc, info := range tn.n.grpcSrv.GetServiceInfo() {
		for _, m := range info.Methods {
			served["/"+svc+"/"+m.Name] = m.IsClientStream || m.IsServerStream
		}
	}
	if len(served) == 0 {
		t.Fatal("the admin server serves no RPCs")
	}
	return served
}

// methodDescriptor finds an RPC's descriptor in the registered proto files.
func methodDescriptor(t *testing.T, fullMethod string) protoreflect.MethodDescriptor {
	t.Helper()
	svc, method := splitMethod(t, fullMethod)
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		t.Fatalf("%s: service not in the proto registry: %v", fullMethod, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		t.Fatalf("%s: %s is not a service", fullMethod, svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		t.Fatalf("%s: no such method in the service descriptor", fullMethod)
	}
	return md
}

func splitMethod(t *testing.T, fullMethod string) (svc, method string) {
	t.Helper()
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		t.Fatalf("bad full method name %q", fullMethod)
	}
	return svc, method
}

// Every RPC the admin server serves is classified exactly once, in writeMethods (run on
// the leader, forwarded) or in localMethods (run on the node asked), and both lists name
// only RPCs that exist. An RPC added to a service without a decision fails here: a write
// left out would silently run on a follower, whose state it cannot change.
func TestEveryAdminRPCIsClassifiedAsWriteOrLocal(t *testing.T) {
	served := servedMethods(t)
	for m := range writeMethods {
		if slices.Contains(localMethods, m) {
			t.Errorf("%s is in both writeMethods and localMethods in forward.go", m)
		}
		if _, ok := served[m]; !ok {
			t.Errorf("writeMethods names %s, which the admin server does not serve", m)
		}
	}
	for i, m := range localMethods {
		if slices.Contains(localMethods[:i], m) {
			t.Errorf("localMethods names %s twice", m)
		}
		if _, ok := served[m]; !ok {
			t.Errorf("localMethods names %s, which the admin server does not serve", m)
		}
	}
	for m, streams := range served {
		switch {
		case writeMethods[m] && streams:
			t.Errorf("%s is a streaming write: forwarding handles unary RPCs only", m)
		case !writeMethods[m] && !slices.Contains(localMethods, m):
			t.Errorf("%s is not classified: add it to writeMethods (it changes the replicated state) "+
				"or to localMethods (it runs on the node asked) in node/forward.go", m)
		}
	}
}

// A forwarded write decodes the leader's answer into a message built by reflection from
// the method's descriptor (newResponse): for every write it must be the RPC's output type.
func TestForwardedWritesBuildTheirResponseType(t *testing.T) {
	for m := range writeMethods {
		md := methodDescriptor(t, m)
		resp, err := newResponse(m)
		if err != nil {
			t.Errorf("newResponse(%s): %v", m, err)
			continue
		}
		if got, want := resp.ProtoReflect().Descriptor().FullName(), md.Output().FullName(); got != want {
			t.Errorf("newResponse(%s) built a %s, want %s", m, got, want)
		}
	}
	for _, bad := range []string{"", "/", "/tollgate.v1.NoSuchService/CreateKey", "/tollgate.v1.KeyService/NoSuchMethod"} {
		if _, err := newResponse(bad); err == nil {
			t.Errorf("newResponse(%q) succeeded, want an error", bad)
		}
	}
}
