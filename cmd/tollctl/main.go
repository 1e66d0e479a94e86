// Command tollctl is the admin CLI for Tollgate. It talks only to the public
// gRPC admin API (KeyService, TeamService, ModelService, CredentialService,
// SpendService, ClusterService, UserService, AuditService).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

const (
	defaultAddr = "127.0.0.1:4100"
	envAddr     = "TOLLGATE_ADDR"
	envToken    = "TOLLGATE_TOKEN"
	envTLSCA    = "TOLLGATE_TLS_CA"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the CLI with the given arguments and streams and returns the
// process exit code: 0 on success, 1 when the command failed, 2 on usage
// errors.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{
		stdin:     stdin,
		stdout:    stdout,
		stderr:    stderr,
		lookupEnv: os.LookupEnv,
		now:       time.Now,
	}
	return a.execute(args)
}

// app holds the global options and the lazily opened connection shared by
// all commands of one invocation.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
	now            func() time.Time

	addr    string
	token   string
	timeout time.Duration
	output  string
	// TLS to the admin API: tlsCA verifies the node's certificate;
	// useTLS alone verifies it against the system's roots.
	tlsCA, tlsServerName string
	useTLS               bool
	tlsProbed            int // speaksTLS: 0 not yet, 1 yes, 2 no

	// started is set once a command's own code runs; errors before that
	// come from cobra's flag and argument checks and are usage errors.
	started bool
	conn    *grpc.ClientConn
}

// usageError marks an error as the caller's mistake (exit code 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func (a *app) execute(args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)

	cmd, err := root.ExecuteC()
	if a.conn != nil {
		_ = a.conn.Close()
	}
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) || !a.started {
		msg := strings.TrimRight(err.Error(), "\n")
		fmt.Fprintf(a.stderr, "tollctl: %s\nRun '%s --help' for usage.\n", msg, cmd.CommandPath())
		return 2
	}
	fmt.Fprintf(a.stderr, "tollctl: %s\n", a.describe(err))
	return 1
}

// action wraps a command's RunE so that errors from it count as failures
// rather than usage errors.
func (a *app) action(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.started = true
		return fn(cmd, args)
	}
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "tollctl",
		Short: "Administer a Tollgate LLM gateway",
		Long: `tollctl manages a Tollgate gateway through its gRPC admin API: virtual API
keys and the teams they belong to, with their budgets; model routes with their
upstream deployments and prices; provider credentials; spend reports and
request logs; and the cluster of gateway nodes that replicates them.

Money is given and shown in dollars (budgets like 100 or 12.50, prices in
dollars per million tokens); JSON output keeps the API's integer units:
nano-dollars (1e-9 USD) for spend and budgets, micro-dollars per million
tokens for prices.

Every call carries the admin token (--token or TOLLGATE_TOKEN) and goes to the
admin address (--addr or TOLLGATE_ADDR). The token is the bootstrap admin token
or a user's own (tollctl user create); the user's role decides which calls it
may make, and every change is recorded in the audit log (tollctl audit). The connection is plaintext gRPC
unless --tls-ca (TOLLGATE_TLS_CA) or --tls is given; without TLS use it only on
loopback or a private network.

Any node of a cluster answers; changes are forwarded to the leader. Calls that
find a node restarting or an election in progress are retried until --timeout.

Output is a human table by default; use -o json for scripts.`,
		Example: `  export TOLLGATE_TOKEN=...
  tollctl model add gpt-4o --provider openai --credential openai
  tollctl key create --name ci --models gpt-4o --expires-in 30d
  tollctl key list -o json | jq -r '.[].id'
  tollctl team create --name research --budget 500 --period month
  tollctl spend report --by team --since 7d
  tollctl cluster status
  tollctl cluster snapshot save backup.snap
  tollctl user create alice --role operator -o json | jq -r .token
  tollctl audit --user alice --since 7d`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		PersistentPreRunE: a.setup,
	}
	f := root.PersistentFlags()
	f.StringVar(&a.addr, "addr", defaultAddr, "address (host:port) of the Tollgate admin gRPC API (env "+envAddr+")")
	f.StringVar(&a.token, "token", "", "admin bearer token (env "+envToken+")")
	f.DurationVar(&a.timeout, "timeout", 10*time.Second, "deadline for the whole command, e.g. 5s or 1m")
	f.StringVarP(&a.output, "output", "o", "table", "output format: table or json")
	f.StringVar(&a.tlsCA, "tls-ca", "", "PEM certificate of the cluster CA: connect over TLS and verify the node's certificate with it (env "+envTLSCA+")")
	f.BoolVar(&a.useTLS, "tls", false, "connect over TLS, verifying the node's certificate against the system's roots (implied by --tls-ca)")
	f.StringVar(&a.tlsServerName, "tls-server-name", "", "name to verify in the node's certificate (default: the host of --addr)")

	root.AddGroup(
		&cobra.Group{ID: "resources", Title: "Resource Commands:"},
		&cobra.Group{ID: "spend", Title: "Spend Commands:"},
		&cobra.Group{ID: "cluster", Title: "Cluster Commands:"},
		&cobra.Group{ID: "access", Title: "Access Commands:"},
		&cobra.Group{ID: "other", Title: "Other Commands:"},
	)
	for _, c := range []*cobra.Command{a.keyCommand(), a.teamCommand(), a.modelCommand(), a.credentialCommand(), a.mcpCommand()} {
		c.GroupID = "resources"
		root.AddCommand(c)
	}
	s := a.spendCommand()
	s.GroupID = "spend"
	root.AddCommand(s)
	c := a.clusterCommand()
	c.GroupID = "cluster"
	root.AddCommand(c)
	for _, c := range []*cobra.Command{a.userCommand(), a.auditCommand()} {
		c.GroupID = "access"
		root.AddCommand(c)
	}
	v := a.versionCommand()
	v.GroupID = "other"
	root.AddCommand(v)
	root.SetHelpCommandGroupID("other")
	root.SetCompletionCommandGroupID("other")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{msg: err.Error()}
	})
	return root
}

// setup resolves environment defaults and validates the global flags.
func (a *app) setup(cmd *cobra.Command, _ []string) error {
	flags := cmd.Flags()
	if !flags.Changed("addr") {
		if v, ok := a.lookupEnv(envAddr); ok && v != "" {
			a.addr = v
		}
	}
	if !flags.Changed("token") {
		if v, ok := a.lookupEnv(envToken); ok {
			a.token = v
		}
	}
	if !flags.Changed("tls-ca") {
		if v, ok := a.lookupEnv(envTLSCA); ok {
			a.tlsCA = v
		}
	}
	if a.tlsServerName != "" && a.tlsCA == "" && !a.useTLS {
		return usageErrorf("--tls-server-name needs --tls-ca or --tls")
	}
	switch a.output {
	case "table", "json":
	default:
		return usageErrorf("invalid --output %q: use table or json", a.output)
	}
	if a.timeout <= 0 {
		return usageErrorf("--timeout must be positive")
	}
	return nil
}

// groupCommand returns a parent command that only holds subcommands and
// rejects unknown ones as usage errors.
func groupCommand(use, short, long, example string) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: example,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
}

// exactArgs is cobra.ExactArgs with a friendlier message naming the
// expected arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		if len(args) < len(names) {
			return usageErrorf("missing argument %s", strings.ToUpper(names[len(args)]))
		}
		if len(names) == 0 {
			return usageErrorf("unexpected argument %q", args[0])
		}
		return usageErrorf("too many arguments: expected only %s", strings.ToUpper(strings.Join(names, " ")))
	}
}
