package main

import (
	"errors"
	"flag"
	"os"
	"strings"

	"github.com/tollgate/tollgate/node/console"
)

// oidcOptions are the single sign-on flags.
type oidcOptions struct {
	issuer, clientID, redirectURL, roleClaim, roleMap, scopes string
}

func (c *oidcOptions) define(fs *flag.FlagSet) {
	str := func(p *string, name, env, def, usage string) {
		fs.StringVar(p, name, envOr(env, def), usage+" ["+env+"]")
	}
	str(&c.issuer, "oidc-issuer", "TOLLGATE_OIDC_ISSUER", "", "OpenID Connect issuer URL for single sign-on to the web console; empty: off. The client secret comes from TOLLGATE_OIDC_CLIENT_SECRET")
	str(&c.clientID, "oidc-client-id", "TOLLGATE_OIDC_CLIENT_ID", "", "the console's client id at the OIDC provider")
	str(&c.redirectURL, "oidc-redirect-url", "TOLLGATE_OIDC_REDIRECT_URL", "", "the console's callback as registered at the provider (default: http(s)://CONSOLE-ADDR/api/oidc/callback)")
	str(&c.roleClaim, "oidc-role-claim", "TOLLGATE_OIDC_ROLE_CLAIM", "groups", "ID token claim that lists the user's groups")
	str(&c.roleMap, "oidc-role-map", "TOLLGATE_OIDC_ROLE_MAP", "", "groups to console roles, first match wins: GROUP=ROLE,... with ROLE admin, operator, viewer or team-admin:TEAMID (e.g. platform-admins=admin,sre=operator,finance=viewer); users in no mapped group are refused")
	str(&c.scopes, "oidc-scopes", "TOLLGATE_OIDC_SCOPES", "openid,email,profile,groups", "comma-separated scopes asked of the provider")
}

// config returns the single sign-on configuration, nil when off.
func (c *oidcOptions) config(consoleAddr string) (*console.OIDCConfig, error) {
	if c.issuer == "" {
		return nil, nil
	}
	if consoleAddr == "" {
		return nil, errors.New("--oidc-issuer needs the web console (--console-addr)")
	}
	if c.clientID == "" || c.roleMap == "" {
		return nil, errors.New("--oidc-issuer needs --oidc-client-id and --oidc-role-map")
	}
	roles, err := console.ParseRoleMap(c.roleMap)
	if err != nil {
		return nil, errors.New("--oidc-role-map: " + err.Error())
	}
	cfg := &console.OIDCConfig{Issuer: c.issuer, ClientID: c.clientID, ClientSecret: os.Getenv("TOLLGATE_OIDC_CLIENT_SECRET"),
		RedirectURL: c.redirectURL, RoleClaim: c.roleClaim, Roles: roles}
	for _, s := range strings.Split(c.scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.Scopes = append(cfg.Scopes, s)
		}
	}
	return cfg, nil
}
