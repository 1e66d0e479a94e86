package mcp

import (
	"context"
	"slices"
	"sort"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/raftstore"
)

// Prompts are forwarded like tools: namespaced ("server__prompt") on
// /mcp, under their own names on /mcp/NAME, and filtered by the same
// allow-lists. Getting a prompt counts like a tool call against the key's
// rate limits and is recorded, but is never priced.

// listPrompts lists an upstream's prompts, when it has the capability.
func listPrompts(ctx context.Context, sess *sdk.ClientSession) ([]*sdk.Prompt, error) {
	if ir := sess.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Prompts == nil {
		return nil, nil
	}
	out, err := listAll(func(cursor string) ([]*sdk.Prompt, string, error) {
		res, err := sess.ListPrompts(ctx, &sdk.ListPromptsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Prompts, res.NextCursor, nil
	})
	out = slices.DeleteFunc(out, func(p *sdk.Prompt) bool { return resourceNamed(p.Name) })
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

func (g *Gateway) listPromptsFor(scope string, req *sdk.ListPromptsRequest) (sdk.Result, error) {
	prompts, err := listAllowed(g, scope, req, func(u *upstream) ([]*sdk.Prompt, bool) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.sess == nil {
			return nil, false // a prompt of a server that is down is not listed
		}
		return u.prompts, true
	}, func(u *upstream, p *sdk.Prompt) string { return u.name + raftstore.McpToolSeparator + p.Name },
		func(_ *upstream, c *sdk.Prompt, ns string, _ bool) {
			if scope == "" {
				c.Name = ns
			}
		})
	if err != nil {
		return nil, err
	}
	return &sdk.ListPromptsResult{Prompts: prompts}, nil
}

// getPrompt forwards a prompts/get, governed like a tool call: allowed by
// the same allow-lists, rate-limited, recorded (model "mcp-prompt:NS"),
// never priced.
func (g *Gateway) getPrompt(ctx context.Context, scope string, req *sdk.GetPromptRequest) (sdk.Result, error) {
	server, name, ns := splitTool(scope, req.Params.Name)
	size := 0
	for k, v := range req.Params.Arguments {
		size += len(k) + len(v)
	}
	return g.governed(ctx, req, &request{kind: "prompt", model: "mcp-prompt:" + sanitize(ns), server: server, name: name, label: req.Params.Name,
		reqBytes: size, allowed: func(pol raftstore.McpPolicy) bool { return !resourceNamed(name) && pol.Allows(ns) },
		send: func(ctx context.Context, _ *upstream, sess *sdk.ClientSession) (sdk.Result, error) {
			return sess.GetPrompt(ctx, &sdk.GetPromptParams{Name: name, Arguments: req.Params.Arguments})
		}})
}
