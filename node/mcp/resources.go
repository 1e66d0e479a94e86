package mcp

import (
	"context"
	"net/url"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/raftstore"
)

// Resources are forwarded like tools and prompts.
//
// URIs: on /mcp/NAME a resource keeps its upstream URI. On /mcp, which
// aggregates servers, it is "tollgate://SERVER/" followed by the upstream
// URI unchanged (demo://resource/1 of server docs is
// tollgate://docs/demo://resource/1); templates get the same prefix, so
// what a client fills in still lands in the upstream's template. The
// gateway routes a read by the prefix and sends the upstream its own URI.
//
// Allow-lists: a resource is reachable when the key's (and team's)
// allow-list allows the name "SERVER__resource:URI" (the upstream URI).
// So "SERVER__*" and "*" reach all of a server (tools, prompts and
// resources), "docs__resource:*" all of docs' resources and none of its
// tools, "docs__resource:file:///srv/public/*" some of them. A template
// is listed when its pattern-name "SERVER__resource:TEMPLATE" is allowed;
// each read is checked against the URI actually read.
//
// resources/read counts against the key's rate limits like a tool call
// and is recorded (model "mcp-resource:SERVER", mcp_tool the upstream
// URI), never priced. Subscriptions are not forwarded.

// resourcePrefix starts the URIs of the aggregated endpoint.
const resourcePrefix = "tollgate://"

// resourceName is the name the allow-lists see for a server's URI.
func resourceName(server, uri string) string {
	return server + raftstore.McpToolSeparator + "resource:" + uri
}

// resourceNamed reports whether a tool's or prompt's name starts as the
// allow-lists' resource names do ("resource:URI"): a grant of resources
// would reach it, so the gateway neither lists nor forwards it.
func resourceNamed(name string) bool { return strings.HasPrefix(name, "resource:") }

// aggregatedURI is a server's URI as /mcp shows it.
func aggregatedURI(server, uri string) string { return resourcePrefix + server + "/" + uri }

// splitResource returns the server and its own URI of a URI a client sent
// in scope; ok is false for an aggregated URI without a server.
func splitResource(scope, uri string) (server, upstreamURI string, ok bool) {
	if scope != "" {
		return scope, uri, true
	}
	rest, found := strings.CutPrefix(uri, resourcePrefix)
	if !found {
		return "", "", false
	}
	server, upstreamURI, ok = strings.Cut(rest, "/")
	return server, upstreamURI, ok && server != "" && upstreamURI != ""
}

// listResources lists an upstream's resources and templates, when it has
// the capability.
func listResources(ctx context.Context, sess *sdk.ClientSession) ([]*sdk.Resource, []*sdk.ResourceTemplate, error) {
	if ir := sess.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Resources == nil {
		return nil, nil, nil
	}
	res, err := listAll(func(cursor string) ([]*sdk.Resource, string, error) {
		r, err := sess.ListResources(ctx, &sdk.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r.Resources, r.NextCursor, nil
	})
	if err != nil {
		return nil, nil, err
	}
	tpl, err := listAll(func(cursor string) ([]*sdk.ResourceTemplate, string, error) {
		r, err := sess.ListResourceTemplates(ctx, &sdk.ListResourceTemplatesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r.ResourceTemplates, r.NextCursor, nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(res, func(i, j int) bool { return res[i].URI < res[j].URI })
	sort.Slice(tpl, func(i, j int) bool { return tpl[i].URITemplate < tpl[j].URITemplate })
	return res, tpl, nil
}

// upResources returns an upstream's resources and templates as last
// listed, or none while it is down.
func (u *upstream) upResources() ([]*sdk.Resource, []*sdk.ResourceTemplate) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess == nil {
		return nil, nil
	}
	return u.resources, u.templates
}

func (g *Gateway) listResourcesFor(scope string, req *sdk.ListResourcesRequest) (sdk.Result, error) {
	res, err := listAllowed(g, scope, req, func(u *upstream) ([]*sdk.Resource, bool) {
		r, _ := u.upResources()
		return r, true
	}, func(u *upstream, r *sdk.Resource) string { return resourceName(u.name, r.URI) },
		func(u *upstream, c *sdk.Resource, _ string, _ bool) {
			if scope == "" {
				c.URI = aggregatedURI(u.name, c.URI)
			}
		})
	if err != nil {
		return nil, err
	}
	return &sdk.ListResourcesResult{Resources: res}, nil
}

func (g *Gateway) listTemplatesFor(scope string, req *sdk.ListResourceTemplatesRequest) (sdk.Result, error) {
	tpl, err := listAllowed(g, scope, req, func(u *upstream) ([]*sdk.ResourceTemplate, bool) {
		_, t := u.upResources()
		return t, true
	}, func(u *upstream, t *sdk.ResourceTemplate) string { return resourceName(u.name, t.URITemplate) },
		func(u *upstream, c *sdk.ResourceTemplate, _ string, _ bool) {
			if scope == "" {
				c.URITemplate = aggregatedURI(u.name, c.URITemplate)
			}
		})
	if err != nil {
		return nil, err
	}
	return &sdk.ListResourceTemplatesResult{ResourceTemplates: tpl}, nil
}

// readResource forwards a resources/read, governed like a tool call.
func (g *Gateway) readResource(ctx context.Context, scope string, req *sdk.ReadResourceRequest) (sdk.Result, error) {
	uri := req.Params.URI
	server, upURI, ok := splitResource(scope, uri)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "Unknown resource " + quote(uri) + ": resource URIs on /mcp start with " + resourcePrefix + "SERVER/."}
	}
	name := resourceName(server, upURI)
	return g.governed(ctx, req, &request{kind: "resource", model: "mcp-resource:" + sanitize(server), server: server,
		name: upURI, label: uri, reqBytes: len(uri), allowed: func(pol raftstore.McpPolicy) bool { return pol.Allows(name) && !hasDotSegment(upURI) },
		send: func(ctx context.Context, _ *upstream, sess *sdk.ClientSession) (sdk.Result, error) {
			res, err := sess.ReadResource(ctx, &sdk.ReadResourceParams{URI: upURI})
			if err == nil && scope == "" {
				for _, c := range res.Contents {
					if c != nil && c.URI != "" {
						c.URI = aggregatedURI(server, c.URI)
					}
				}
			}
			return res, err
		}})
}

// hasDotSegment reports whether a URI has a "." or ".." segment, also
// percent-encoded (up to a few times) or after a backslash: an upstream
// resolving it could read outside the prefix an allow-list pattern names
// ("docs__resource:file:///srv/public/*").
func hasDotSegment(uri string) bool {
	for range 4 {
		for _, seg := range strings.FieldsFunc(uri, func(r rune) bool { return strings.ContainsRune("/\\?#;", r) }) {
			if seg == "." || seg == ".." {
				return true
			}
		}
		d, err := url.PathUnescape(uri)
		if err != nil || d == uri {
			return false
		}
		uri = d
	}
	return true // still encoded after four rounds
}

// quote quotes a client-supplied string for a message, at most 256 bytes.
func quote(s string) string { return `"` + sanitize(s) + `"` }
