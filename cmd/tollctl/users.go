package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func (a *app) userCommand() *cobra.Command {
	cmd := groupCommand("user",
		"Manage admin users, their roles and tokens",
		`Admin users call the admin API (and tollctl) with their own token, and
their role decides what they may do:

  admin        everything, users included
  operator     keys, teams, models and deployments, credentials; reads
               everything but users; not cluster membership or backups
  viewer       reads keys, teams, models, credential names, spend, cluster
               status and the audit log; never a secret or credential value
  team-admin   the keys of one team (--team), with models within --models
               and budgets within the team's; sees only that team and its
               spend

A call a role does not allow is refused with PermissionDenied naming the
permission it needs. The bootstrap admin token keeps working as the user
"bootstrap" with the role admin. Every change is recorded in the audit log
(tollctl audit).`,
		`  tollctl user create alice --role operator -o json | jq -r .token
  tollctl user create bob --role team-admin --team team_3f2a9c --models 'gpt-4o*,claude-*'
  tollctl user list
  tollctl user rotate alice
  tollctl user revoke alice
  tollctl user whoami`)
	cmd.AddCommand(a.userCreateCommand(), a.userListCommand(), a.userGetCommand(),
		a.userRevokeCommand(), a.userRotateCommand(), a.userWhoAmICommand())
	return cmd
}

func (a *app) userCreateCommand() *cobra.Command {
	var (
		role, team string
		models     []string
	)
	cmd := &cobra.Command{
		Use:   "create NAME --role ROLE [--team ID] [--models LIST]",
		Short: "Create a user and print its token once",
		Long: `Create an admin user with a role: admin, operator, viewer or team-admin.
A team-admin needs --team, the team whose keys it manages, and may be given
--models, the models (names or patterns with '*') its keys may use. The
user's token is printed once and stored only as a hash: keep it. With -o json
the user object is printed with a "token" field.`,
		Example: `  tollctl user create alice --role operator
  tollctl user create ci-reader --role viewer -o json | jq -r .token
  tollctl user create bob --role team-admin --team team_3f2a9c --models 'gpt-4o*'`,
		Args: exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.users.CreateUser(ctx, &tollgatev1.CreateUserRequest{
				Name: args[0], Role: role, TeamId: team, Models: cleanList(models)})
			if err != nil {
				return err
			}
			return a.printToken("Created", resp.GetUser(), resp.GetToken())
		}),
	}
	f := cmd.Flags()
	f.StringVar(&role, "role", "", "admin, operator, viewer or team-admin (required)")
	f.StringVar(&team, "team", "", "the team a team-admin manages")
	f.StringSliceVar(&models, "models", nil, "for a team-admin: models its keys may use, comma-separated (default: any)")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

func (a *app) userListCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List users",
		Long: `List admin users with their roles. --all includes revoked users. With -o
json, print an array of users (never a token).`,
		Example: `  tollctl user list
  tollctl user list --all -o json | jq -r '.[] | select(.role == "admin") | .name'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.users.ListUsers(ctx, &tollgatev1.ListUsersRequest{IncludeRevoked: all})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				raw, err := protoJSONList(resp.GetUsers())
				if err != nil {
					return err
				}
				return writeJSON(a.stdout, raw)
			}
			if len(resp.GetUsers()) == 0 {
				fmt.Fprintln(a.stdout, "No users (the bootstrap admin token is not listed).")
				return nil
			}
			tw := newTable(a.stdout)
			row(tw, "NAME", "ROLE", "TEAM", "TOKEN", "CREATED", "REVOKED")
			for _, u := range resp.GetUsers() {
				row(tw, u.GetName(), u.GetRole(), orDash(u.GetTeamId()), orDash(u.GetTokenPrefix())+"…",
					fmtTime(u.GetCreatedAt()), fmtTime(u.GetRevokedAt()))
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "include revoked users")
	return cmd
}

func (a *app) userGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "get NAME",
		Short:   "Show a user",
		Long:    `Show a user: role, team and models (team-admin), token prefix, who created it and when, and whether it is revoked.`,
		Example: `  tollctl user get alice -o json`,
		Args:    exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.users.GetUser(ctx, &tollgatev1.GetUserRequest{Name: args[0]})
			if err != nil {
				return err
			}
			return a.printUser(resp.GetUser())
		}),
	}
}

func (a *app) userRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a user's token",
		Long: `Revoke a user: the leader refuses its token at once, and every other node
once it has applied the revocation (the command returns when every live node
has, or after 3 s naming the nodes that lag; writes through a lagging node are
refused by the leader). The user stays listed (user list --all) and in the
audit log.`,
		Example: `  tollctl user revoke alice`,
		Args:    exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.users.RevokeUser(ctx, &tollgatev1.RevokeUserRequest{Name: args[0]})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(resp.GetUser())
			}
			fmt.Fprintf(a.stdout, "Revoked user %s.\n", args[0])
			return nil
		}),
	}
}

func (a *app) userRotateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rotate NAME",
		Short: "Give a user a new token",
		Long: `Replace a user's token: the old one is refused at once, and the new one is
printed once. With -o json the user object is printed with a "token" field.`,
		Example: `  tollctl user rotate alice -o json | jq -r .token`,
		Args:    exactArgs("name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.users.RotateUser(ctx, &tollgatev1.RotateUserRequest{Name: args[0]})
			if err != nil {
				return err
			}
			return a.printToken("Rotated", resp.GetUser(), resp.GetToken())
		}),
	}
}

func (a *app) userWhoAmICommand() *cobra.Command {
	return &cobra.Command{
		Use:     "whoami",
		Short:   "Show who the token is and what it may do",
		Long:    `Show the user the admin token belongs to ("bootstrap" for the bootstrap admin token), its role and its permissions.`,
		Example: `  TOLLGATE_TOKEN=tgu-... tollctl user whoami`,
		Args:    exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.users.WhoAmI(ctx, &tollgatev1.WhoAmIRequest{})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(resp)
			}
			tw := newTable(a.stdout)
			row(tw, "User:", resp.GetUser())
			row(tw, "Role:", resp.GetRole())
			row(tw, "Team:", orDash(resp.GetTeamId()))
			row(tw, "Permissions:", strings.Join(resp.GetPermissions(), ", "))
			return tw.Flush()
		}),
	}
}

const tokenWarning = "This token is shown only once and cannot be retrieved again. Store it now."

// printToken prints a user together with its new token.
func (a *app) printToken(verb string, u *tollgatev1.User, token string) error {
	if a.jsonOutput() {
		raw, err := protoJSON(u)
		if err == nil {
			raw, err = withField(raw, "token", token)
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stderr, "warning: the token is shown only once and cannot be retrieved again; store it now")
		return writeJSON(a.stdout, raw)
	}
	fmt.Fprintf(a.stdout, "%s user %s.\n\n", verb, u.GetName())
	if err := a.printUser(u); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nToken: %s\n\n%s\n", token, tokenWarning)
	return nil
}

func (a *app) printUser(u *tollgatev1.User) error {
	if a.jsonOutput() {
		return a.printProto(u)
	}
	tw := newTable(a.stdout)
	row(tw, "Name:", u.GetName())
	row(tw, "Role:", u.GetRole())
	row(tw, "Team:", orDash(u.GetTeamId()))
	if u.GetRole() == "team-admin" {
		row(tw, "Models:", fmtModels(u.GetModels()))
	}
	row(tw, "Token:", orDash(u.GetTokenPrefix())+"…")
	row(tw, "Created:", fmtTime(u.GetCreatedAt())+" by "+orDash(u.GetCreatedBy()))
	row(tw, "Revoked:", fmtTime(u.GetRevokedAt()))
	return tw.Flush()
}
