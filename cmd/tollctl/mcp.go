package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func (a *app) mcpCommand() *cobra.Command {
	cmd := groupCommand("mcp",
		"Manage the MCP servers behind the gateway's /mcp endpoint",
		`Upstream MCP servers are part of the replicated configuration: every node
connects to them and serves their tools on its data plane at /mcp (all
servers, tools named SERVER__TOOL) and /mcp/NAME (one server, tools under
their own names), to clients that authenticate with a Tollgate key.

A key reaches only the tools its allow-list and its team's allow-list
permit (mcp tools --key / --team); with neither list set it reaches none.
Header values, credentials and environment values are held by the gateway
(sealed with the secrets key when the nodes have one) and never shown.`,
		`  tollctl mcp add github --url https://mcp.example.com/mcp --credential github
  tollctl mcp add everything --stdio "npx -y @modelcontextprotocol/server-everything"
  tollctl mcp tools --key key_3f2a9c 'github__*' '*__read_*'
  tollctl mcp get github`)
	cmd.AddCommand(a.mcpAddCommand(), a.mcpListCommand(), a.mcpGetCommand(), a.mcpRemoveCommand(),
		a.mcpTestCommand(), a.mcpToolsCommand())
	return cmd
}

func (a *app) mcpClient() (tollgatev1.McpServiceClient, error) {
	if _, err := a.api(); err != nil {
		return nil, err
	}
	return tollgatev1.NewMcpServiceClient(a.conn), nil
}

// mcpAddFlags are the flags of mcp add.
type mcpAddFlags struct {
	url, stdio, credential, price, timeout string
	sse, replace                           bool
	headers, headerEnv, env                []string
}

func (f *mcpAddFlags) server(a *app, name string) (*tollgatev1.McpServer, error) {
	s := &tollgatev1.McpServer{Name: name, Url: f.url, Credential: f.credential}
	switch {
	case f.url != "" && f.stdio != "":
		return nil, usageErrorf("give --url or --stdio, not both")
	case f.stdio != "":
		s.Transport, s.Command = "stdio", strings.Fields(f.stdio)
	case f.url == "":
		return nil, usageErrorf("--url or --stdio is required")
	case f.sse:
		s.Transport = "sse"
	default:
		s.Transport = "http"
	}
	var err error
	if s.Headers, err = parsePairs("--header", "X-Api-Key=secret", f.headers, true); err != nil {
		return nil, err
	}
	fromEnv, err := parsePairs("--header-env", "Authorization=GITHUB_AUTH", f.headerEnv, true)
	if err != nil {
		return nil, err
	}
	for h, v := range fromEnv {
		val, ok := a.lookupEnv(v)
		if !ok || val == "" {
			return nil, usageErrorf("environment variable %s (for header %s) is not set or empty", v, h)
		}
		if s.Headers == nil {
			s.Headers = map[string]string{}
		}
		s.Headers[h] = val
	}
	if s.Env, err = parsePairs("--env", "GITHUB_TOKEN=...", f.env, false); err != nil {
		return nil, err
	}
	if f.price != "" {
		if s.PricePerCallNanos, err = moneyFlag("price-per-call", f.price, 9); err != nil {
			return nil, err
		}
	}
	if f.timeout != "" {
		d, err := parseDuration(f.timeout)
		if err != nil || d < 0 || d > 24*time.Hour {
			return nil, usageErrorf("invalid --tool-timeout %q: use e.g. 30s or 5m", f.timeout)
		}
		s.TimeoutMs = uint32(d / time.Millisecond)
	}
	return s, nil
}

func (a *app) mcpAddCommand() *cobra.Command {
	var f mcpAddFlags
	cmd := &cobra.Command{
		Use:   "add NAME (--url URL [--sse] | --stdio \"CMD ARGS\") [flags]",
		Short: "Add an upstream MCP server",
		Long: `Add an upstream MCP server under NAME (lowercase letters, digits, '-' and
'_', without "__" and not ending in '_'). --url is a Streamable HTTP endpoint, or with --sse a
legacy HTTP+SSE one; --stdio is a command every node spawns and keeps
running, restarting it with backoff when it exits.

--header K=V (or --header-env K=VAR, reading the value from the environment)
and --credential NAME (sent as "Authorization: Bearer <value>") authenticate
the gateway to the server; the agent never sees them. --env K=V sets the
environment of a stdio server. --tool-timeout bounds one tool call (default
60s); --price-per-call (dollars) is charged to the caller's budgets for
every answered call. --replace replaces a server of the same name.`,
		Example: `  tollctl mcp add docs --url http://127.0.0.1:3001/mcp
  tollctl mcp add github --url https://api.githubcopilot.com/mcp/ --header-env Authorization=GITHUB_AUTH
  tollctl mcp add search --url https://search.example.com/mcp --credential search --price-per-call 0.002
  tollctl mcp add fs --stdio "npx -y @modelcontextprotocol/server-filesystem /srv/docs"`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			srv, err := f.server(a, args[0])
			if err != nil {
				return err
			}
			api, err := a.mcpClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.AddMcpServer(ctx, &tollgatev1.AddMcpServerRequest{Server: srv, Replace: f.replace})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(resp.GetServer())
			}
			fmt.Fprintf(a.stdout, "Added MCP server %s; its tools are %s__TOOL on /mcp.\n", resp.GetServer().GetName(), resp.GetServer().GetName())
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "endpoint of a Streamable HTTP (or, with --sse, HTTP+SSE) server")
	fl.BoolVar(&f.sse, "sse", false, "the --url speaks the legacy HTTP+SSE transport")
	fl.StringVar(&f.stdio, "stdio", "", "command (and arguments, split on spaces) of a local server every node runs")
	fl.StringArrayVar(&f.headers, "header", nil, "header K=V sent to the server (repeatable; the value is never shown)")
	fl.StringArrayVar(&f.headerEnv, "header-env", nil, "header K=VAR with the value of environment variable VAR (repeatable)")
	fl.StringArrayVar(&f.env, "env", nil, "environment variable K=V of a stdio server (repeatable; never shown)")
	fl.StringVar(&f.credential, "credential", "", "stored credential sent as \"Authorization: Bearer <value>\"")
	fl.StringVar(&f.timeout, "tool-timeout", "", "bound of one tool call, e.g. 30s (default 60s)")
	fl.StringVar(&f.price, "price-per-call", "", "dollars charged to the caller's budgets per answered call, e.g. 0.002")
	fl.BoolVar(&f.replace, "replace", false, "replace a server of the same name")
	return cmd
}

func (a *app) mcpListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List upstream MCP servers (never header values)",
		Long: `List the upstream MCP servers of the cluster: transport, endpoint (the URL,
or a stdio server's command), what authenticates the gateway to it (the
credential's name, header and environment names; never their values) and
the price per call.`,
		Example: `  tollctl mcp list
  tollctl mcp list -o json | jq -r '.[].name'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			api, err := a.mcpClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.ListMcpServers(ctx, &tollgatev1.ListMcpServersRequest{})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				raw, err := protoJSONList(resp.GetServers())
				if err != nil {
					return err
				}
				return writeJSON(a.stdout, raw)
			}
			if len(resp.GetServers()) == 0 {
				fmt.Fprintln(a.stdout, "No MCP servers.")
				return nil
			}
			tw := newTable(a.stdout)
			row(tw, "NAME", "TRANSPORT", "ENDPOINT", "AUTH", "PRICE/CALL", "UPDATED")
			for _, s := range resp.GetServers() {
				row(tw, s.GetName(), s.GetTransport(), mcpEndpoint(s), mcpAuth(s), fmtNanos(s.GetPricePerCallNanos()), fmtTime(s.GetUpdatedAt()))
			}
			return tw.Flush()
		}),
	}
}

func mcpEndpoint(s *tollgatev1.McpServerInfo) string {
	if s.GetTransport() == "stdio" {
		return strings.Join(s.GetCommand(), " ")
	}
	return s.GetUrl()
}

// mcpAuth names what authenticates the gateway to the server, never a
// value.
func mcpAuth(s *tollgatev1.McpServerInfo) string {
	var parts []string
	if c := s.GetCredential(); c != "" {
		parts = append(parts, "credential "+c)
	}
	if len(s.GetHeaderNames()) > 0 {
		parts = append(parts, "headers "+strings.Join(s.GetHeaderNames(), ","))
	}
	if len(s.GetEnvNames()) > 0 {
		parts = append(parts, "env "+strings.Join(s.GetEnvNames(), ","))
	}
	return orDash(strings.Join(parts, "; "))
}

func (a *app) mcpGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show an MCP server and how the answering node sees it",
		Long: `Show an upstream MCP server's configuration and how the node that answers
sees it: connected, connecting or cooling_down (after a failure, until the
retry time), the upstream's tools under their own names, and the last error.
Each node keeps its own connection: ask another node with --addr.`,
		Example: `  tollctl mcp get github
  tollctl mcp get github -o json | jq .status.state`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.mcpClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.GetMcpServer(ctx, &tollgatev1.GetMcpServerRequest{Name: args[0]})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(resp)
			}
			s, st := resp.GetServer(), resp.GetStatus()
			tw := newTable(a.stdout)
			row(tw, "Name:", s.GetName())
			row(tw, "Transport:", s.GetTransport())
			row(tw, "Endpoint:", mcpEndpoint(s))
			row(tw, "Auth:", mcpAuth(s))
			row(tw, "Price per call:", fmtNanos(s.GetPricePerCallNanos()))
			row(tw, "Node:", orDash(st.GetNode()))
			row(tw, "State:", orDash(st.GetState()))
			row(tw, "Tools:", orDash(strings.Join(st.GetTools(), ", ")))
			if st.GetLastError() != "" {
				row(tw, "Last error:", st.GetLastError())
			}
			return tw.Flush()
		}),
	}
}

func (a *app) mcpRemoveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove an upstream MCP server",
		Long: `Remove an upstream MCP server: every node closes its session (and stops a
stdio server's process), and its tools disappear from /mcp. Allow-lists
that name its tools are left as they are.`,
		Example: `  tollctl mcp remove github`,
		Args:    exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.mcpClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			if _, err := api.RemoveMcpServer(ctx, &tollgatev1.RemoveMcpServerRequest{Name: args[0]}); err != nil {
				return err
			}
			if !a.jsonOutput() {
				fmt.Fprintf(a.stdout, "Removed MCP server %s.\n", args[0])
			}
			return nil
		}),
	}
}

func (a *app) mcpTestCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "test NAME",
		Short: "Connect to an MCP server from the answering node and list its tools",
		Long: `Open a new session to the server from the node that answers (with the
stored headers or credential), list its tools and report how long that
took and the protocol version agreed, or why it failed (exit code 1).`,
		Example: `  tollctl mcp test github
  tollctl mcp test github --addr node2:4100 -o json`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.mcpClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.TestMcpServer(ctx, &tollgatev1.TestMcpServerRequest{Name: args[0]})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if err := a.printProto(resp); err != nil {
					return err
				}
			} else if resp.GetOk() {
				fmt.Fprintf(a.stdout, "OK from %s in %s (protocol %s): %d tools: %s\n", resp.GetNode(),
					time.Duration(resp.GetLatencyMicros())*time.Microsecond, resp.GetProtocolVersion(),
					len(resp.GetTools()), strings.Join(resp.GetTools(), ", "))
			}
			if !resp.GetOk() {
				return fmt.Errorf("mcp server %s from node %s: %s", args[0], resp.GetNode(), resp.GetError())
			}
			return nil
		}),
	}
}

func (a *app) mcpToolsCommand() *cobra.Command {
	var key, team string
	var clear bool
	cmd := &cobra.Command{
		Use:   "tools (--key ID | --team ID) (PATTERN... | --clear)",
		Short: "Set the MCP tools a key or a team may use",
		Long: `Replace the MCP tool allow-list of a key or of a team with the given names
or patterns of namespaced tools (SERVER__TOOL; '*' matches any run of
characters: 'github__*', '*__read_*', '*'). A key reaches a tool when its
own list and its team's list both allow it (a list not set allows what the
other allows); with neither set it reaches none. Tools outside are not
listed and calls to them are refused. --clear removes the list.`,
		Example: `  tollctl mcp tools --key key_3f2a9c 'github__*' 'docs__search'
  tollctl mcp tools --team team_7b1e '*__read_*' '*__list_*'
  tollctl mcp tools --key key_3f2a9c --clear`,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if (key == "") == (team == "") {
				return usageErrorf("give --key or --team")
			}
			if clear == (len(args) > 0) {
				return usageErrorf("give tool patterns, or --clear")
			}
			api, err := a.mcpClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.SetMcpTools(ctx, &tollgatev1.SetMcpToolsRequest{KeyId: key, TeamId: team, Tools: cleanList(args)})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(resp)
			}
			who := "key " + key
			if team != "" {
				who = "team " + team
			}
			fmt.Fprintf(a.stdout, "MCP tools of %s: %s\n", who, orDash(strings.Join(resp.GetTools(), " ")))
			return nil
		}),
	}
	cmd.Flags().StringVar(&key, "key", "", "id of the key")
	cmd.Flags().StringVar(&team, "team", "", "id of the team")
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the allow-list")
	return cmd
}
