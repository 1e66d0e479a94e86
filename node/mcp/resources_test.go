package mcp

import (
	"context"
	"net/http"
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resources are listed and read through the gateway under
// tollgate://SERVER/URI on /mcp, filtered by the allow-list's
// SERVER__resource:URI names, and every read is recorded.
func TestResourcesForwardedByAllowList(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"up__resource:file:///pub/*"}, nil)
	for i, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := e.connect("/mcp", secret, v, nil)
			ctx := context.Background()
			lr, err := cs.ListResources(ctx, nil)
			if err != nil || len(lr.Resources) != 1 || lr.Resources[0].URI != "tollgate://up/file:///pub/a.txt" {
				t.Fatalf("resources %v %v", lr, err)
			}
			lt, err := cs.ListResourceTemplates(ctx, nil)
			if err != nil || len(lt.ResourceTemplates) != 1 || lt.ResourceTemplates[0].URITemplate != "tollgate://up/file:///pub/{name}" {
				t.Fatalf("templates %v %v", lt, err)
			}
			got, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "tollgate://up/file:///pub/c.txt"})
			if err != nil || len(got.Contents) != 1 || got.Contents[0].Text != "contents of file:///pub/c.txt" ||
				got.Contents[0].URI != "tollgate://up/file:///pub/c.txt" {
				t.Fatalf("read %v %v", got, err)
			}
			for _, uri := range []string{"tollgate://up/file:///priv/b.txt", "file:///pub/a.txt", "tollgate://nope/file:///pub/a.txt"} {
				if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri}); !isRPCError(err, -32602) {
					t.Fatalf("read %s: %v, want refused", uri, err)
				}
			}
			recs := e.waitRecords(3 * (i + 1))[3*i:]
			var outcomes []string
			for _, r := range recs {
				outcomes = append(outcomes, r.GetOutcome())
			}
			if !slices.Equal(outcomes, []string{outcomeOK, outcomeRefused, outcomeRefused}) || recs[0].GetModel() != "mcp-resource:up" ||
				recs[0].GetMcpTool() != "file:///pub/c.txt" || recs[0].GetResponseBytes() == 0 {
				t.Fatalf("records %v", recs)
			}
		})
	}
}

// On /mcp/NAME resources keep their upstream URIs; "SERVER__*" reaches
// them all.
func TestResourcesOfOneServerKeepTheirURIs(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	cs := e.connect("/mcp/up", e.addKey("k1", []string{"up__*"}, nil), "", nil)
	lr, err := cs.ListResources(context.Background(), nil)
	if err != nil || len(lr.Resources) != 2 || lr.Resources[0].URI != "file:///priv/b.txt" {
		t.Fatalf("resources %v %v", lr, err)
	}
	got, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "file:///priv/b.txt"})
	if err != nil || got.Contents[0].URI != "file:///priv/b.txt" {
		t.Fatalf("read %v %v", got, err)
	}
}

// A key allowed tools only reaches no resource.
func TestToolAllowListReachesNoResource(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__echo"}, nil), "", nil)
	lr, err := cs.ListResources(context.Background(), nil)
	if err != nil || len(lr.Resources) != 0 {
		t.Fatalf("resources %v %v", lr, err)
	}
	if _, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "tollgate://up/file:///pub/a.txt"}); !isRPCError(err, -32602) {
		t.Fatalf("read: %v, want refused", err)
	}
}

// A pattern naming a prefix of URIs cannot be escaped with dot segments
// ("..", also percent-encoded or after a backslash): an upstream resolving
// them would read outside the prefix the allow-list names. Such reads are
// refused and recorded as refused, without reaching the upstream.
func TestResourceReadWithDotSegmentsRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__resource:file:///pub/*"}, nil), "", nil)
	uris := []string{"tollgate://up/file:///pub/../priv/b.txt", "tollgate://up/file:///pub/%2e%2e/priv/b.txt",
		"tollgate://up/file:///pub/%2E%2E%2Fpriv%2Fb.txt", "tollgate://up/file:///pub/..\\priv\\b.txt",
		"tollgate://up/file:///pub/%252e%252e/priv/b.txt", "tollgate://up/file:///pub/./../priv/b.txt"}
	for _, uri := range uris {
		if _, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri}); !isRPCError(err, -32602) {
			t.Fatalf("read %s: %v, want refused", uri, err)
		}
	}
	for _, r := range e.waitRecords(len(uris)) {
		if r.GetOutcome() != outcomeRefused {
			t.Fatalf("record %v, want refused", r)
		}
	}
	if _, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "tollgate://up/file:///pub/a..b.txt"}); err != nil {
		t.Fatalf("a name with dots is not a dot segment: %v", err)
	}
}

// A tool or prompt named "resource:URI" would be reached by a grant of
// that resource (its allow-list name is the resource's): the gateway
// neither lists nor forwards it, and the resource itself stays readable.
func TestToolNamedLikeAResourceIsNeitherListedNorCalled(t *testing.T) {
	e := &env{t: t, store: openStore(t)}
	e.upstream = newTestUpstreamServing(t, func(s *sdk.Server) http.Handler {
		s.AddTool(&sdk.Tool{Name: "resource:file:///pub/x", InputSchema: objectSchema},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				t.Error("the tool named like a resource was called")
				return &sdk.CallToolResult{}, nil
			})
		s.AddPrompt(&sdk.Prompt{Name: "resource:file:///pub/y"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			t.Error("the prompt named like a resource was got")
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{}}, nil
		})
		return bothProtocols(s)
	})
	e.start(Config{})
	e.addServer("up", e.upstream.url)
	cs := e.connect("/mcp", e.addKey("k1", []string{"up__resource:file:///pub/*"}, nil), "", nil)
	if got := toolNames(t, cs); len(got) != 0 {
		t.Errorf("tools listed for a key granted only resources: %v", got)
	}
	if lp, err := cs.ListPrompts(context.Background(), nil); err != nil || len(lp.Prompts) != 0 {
		t.Errorf("prompts listed for a key granted only resources: %v %v", lp, err)
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__resource:file:///pub/x"}); !isRPCError(err, -32602) {
		t.Errorf("call of a tool named like a resource: %v, want refused", err)
	}
	if _, err := cs.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: "up__resource:file:///pub/y"}); !isRPCError(err, -32602) {
		t.Errorf("get of a prompt named like a resource: %v, want refused", err)
	}
	if _, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "tollgate://up/file:///pub/a.txt"}); err != nil {
		t.Errorf("the granted resource: %v", err)
	}
}
