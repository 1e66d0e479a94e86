package mcp

import (
	"context"
	"fmt"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/raftstore"
)

// Prompts are forwarded like tools: namespaced ("server__prompt") on
// /mcp, under their own names on /mcp/NAME, and filtered by the same
// allow-lists. Getting a prompt is not a tool call: it is not limited,
// priced nor recorded.

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
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

func (g *Gateway) listPromptsFor(scope string, req *sdk.ListPromptsRequest) (sdk.Result, error) {
	key, err := keyOf(req)
	if err != nil {
		return nil, err
	}
	policy := g.cfg.State.State().McpPolicy(key.ID, key.TeamID)
	out := &sdk.ListPromptsResult{Prompts: []*sdk.Prompt{}}
	for _, u := range g.upstreams(scope) {
		u.mu.Lock()
		prompts, up := u.prompts, u.sess != nil
		u.mu.Unlock()
		if !up {
			continue
		}
		for _, p := range prompts {
			ns := u.name + raftstore.McpToolSeparator + p.Name
			if !policy.Allows(ns) {
				continue
			}
			c := *p
			if scope == "" {
				c.Name = ns
			}
			out.Prompts = append(out.Prompts, &c)
		}
	}
	return out, nil
}

func (g *Gateway) getPrompt(ctx context.Context, scope string, req *sdk.GetPromptRequest) (sdk.Result, error) {
	key, err := keyOf(req)
	if err != nil {
		return nil, err
	}
	server, name, ns := splitTool(scope, req.Params.Name)
	u := g.upstream(server)
	if u == nil || !g.cfg.State.State().McpPolicy(key.ID, key.TeamID).Allows(ns) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("Unknown prompt %q, or not allowed for this key.", req.Params.Name)}
	}
	sess, why := u.session()
	if sess == nil {
		return nil, &jsonrpc.Error{Code: codeGateway, Message: fmt.Sprintf("MCP server %s is unavailable: %s", server, why)}
	}
	cctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	return sess.GetPrompt(cctx, &sdk.GetPromptParams{Name: name, Arguments: req.Params.Arguments})
}
