package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// maxCredentialSize bounds what credential set reads from stdin.
const maxCredentialSize = 64 << 10

func (a *app) credentialCommand() *cobra.Command {
	cmd := groupCommand("credential",
		"Manage provider credentials (upstream API keys)",
		`Credentials are provider secrets, such as an OpenAI API key, stored by the
gateway under a name that deployments refer to (model add --credential NAME).
Values can be set and deleted but never read back; listings show only the
last four characters.`,
		`  tollctl credential set openai < openai.key
  tollctl credential list`)
	cmd.AddCommand(a.credentialSetCommand(), a.credentialListCommand(), a.credentialDeleteCommand())
	return cmd
}

func (a *app) credentialSetCommand() *cobra.Command {
	var (
		value, fromEnv string
		stdin          bool
	)
	cmd := &cobra.Command{
		Use:   "set NAME [--stdin | --from-env VAR | --value V]",
		Short: "Create or replace a credential",
		Long: `Store a provider secret under NAME, replacing any earlier value. The value
is read from standard input by default (one line from a terminal, typed
without echo; everything from a pipe, minus the final newline). It is never
printed. --value works too but leaves the secret in your shell history.`,
		Example: `  tollctl credential set openai < openai.key
  pass show openai | tollctl credential set openai
  tollctl credential set openai --from-env OPENAI_API_KEY`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			var v string
			switch {
			case cmd.Flags().Changed("value"):
				fmt.Fprintln(a.stderr, "warning: --value leaves the secret in your shell history; prefer --stdin or --from-env")
				v = value
			case cmd.Flags().Changed("from-env"):
				env, ok := a.lookupEnv(fromEnv)
				if !ok || env == "" {
					return usageErrorf("environment variable %s is not set or empty", fromEnv)
				}
				v = env
			default:
				var err error
				if v, err = a.readSecret(name); err != nil {
					return err
				}
			}
			if v == "" {
				return usageErrorf("the credential value is empty")
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.creds.SetCredential(ctx, &tollgatev1.SetCredentialRequest{Name: name, Value: v})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(resp.GetCredential())
			}
			c := resp.GetCredential()
			fmt.Fprintf(a.stdout, "Credential %s set (ends in %s).\n", c.GetName(), orDash(c.GetHint()))
			return nil
		}),
	}
	f := cmd.Flags()
	f.BoolVar(&stdin, "stdin", false, "read the value from standard input (the default)")
	f.StringVar(&fromEnv, "from-env", "", "read the value from this environment variable")
	f.StringVar(&value, "value", "", "the value itself (leaves it in shell history; avoid)")
	cmd.MarkFlagsMutuallyExclusive("stdin", "from-env", "value")
	return cmd
}

// readSecret reads a credential value from stdin: one hidden line from a
// terminal, or the whole input from a pipe or file.
func (a *app) readSecret(name string) (string, error) {
	if f, ok := a.stdin.(*os.File); ok {
		line, isTerm, err := readHidden(f, func() {
			fmt.Fprintf(a.stderr, "Value for credential %s (input hidden): ", name)
		})
		if isTerm {
			fmt.Fprintln(a.stderr)
			return strings.TrimRight(line, "\r\n"), err
		}
	}
	b, err := io.ReadAll(io.LimitReader(a.stdin, maxCredentialSize+1))
	if err != nil {
		return "", fmt.Errorf("reading the credential from stdin: %v", err)
	}
	if len(b) > maxCredentialSize {
		return "", usageErrorf("the credential on stdin is longer than %d bytes", maxCredentialSize)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func (a *app) credentialListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List credentials (names and hints, never values)",
		Long: `List stored credentials. HINT is the last four characters of the value,
to tell credentials apart; the values themselves cannot be read back.`,
		Example: `  tollctl credential list
  tollctl credential list -o json | jq -r '.[].name'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.creds.ListCredentials(ctx, &tollgatev1.ListCredentialsRequest{})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				raw, err := protoJSONList(resp.GetCredentials())
				if err != nil {
					return err
				}
				return writeJSON(a.stdout, raw)
			}
			if len(resp.GetCredentials()) == 0 {
				fmt.Fprintln(a.stdout, "No credentials.")
				return nil
			}
			tw := newTable(a.stdout)
			row(tw, "NAME", "HINT", "UPDATED")
			for _, c := range resp.GetCredentials() {
				row(tw, c.GetName(), orDash(c.GetHint()), fmtTime(c.GetUpdatedAt()))
			}
			return tw.Flush()
		}),
	}
}

func (a *app) credentialDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a credential",
		Long: `Delete a stored credential. Deployments that still name it will fail to
authenticate upstream until they are changed (model update --credential).
With -o json an empty object is printed.`,
		Example: `  tollctl credential delete openai-old`,
		Args:    exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.creds.DeleteCredential(ctx, &tollgatev1.DeleteCredentialRequest{Name: args[0]})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(resp)
			}
			fmt.Fprintf(a.stdout, "Deleted credential %s.\n", args[0])
			return nil
		}),
	}
}
