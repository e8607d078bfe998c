// Command postgres is Cairn's official PostgreSQL secrets plugin (spec part A 1.3): two secret
// engines a credential's secret field can read from (`secret_sources` on POST /v1/credentials).
//
//   - postgres-table (static): reads a stored secret by name from a table when a run starts
//     (`SELECT value FROM <table> WHERE name = $1`). ref is the secret's name.
//   - postgres-role (dynamic): mints a PostgreSQL login for each run, a role with a random name
//     and password that expires (VALID UNTIL) after SERVICE_PLUGIN_PG_ROLE_TTL, a member of the
//     group role the ref names (which holds the privileges the run gets); the value is the
//     login's connection URL. When the run's execution ends Cairn asks this process to revoke
//     it: its sessions are ended and the role is dropped. A login whose plugin died first expires
//     at VALID UNTIL (and can be dropped later: every such role is named cairn_run_…).
//
// Settings (the plugin sees only SERVICE_PLUGIN_* variables of the server's environment):
//
//	SERVICE_PLUGIN_PG_URL          connection URL of the account the plugin works as (required;
//	                               it needs CREATEROLE and ADMIN OPTION on the group roles)
//	SERVICE_PLUGIN_PG_TABLE        the secrets table of postgres-table (default cairn_secrets;
//	                               columns name text primary key, value text)
//	SERVICE_PLUGIN_PG_ROLE_TTL     how long a minted login lives at most (Go duration, default 1h)
//	SERVICE_PLUGIN_PG_LOGIN_HOST   host:port runs connect to, when not SERVICE_PLUGIN_PG_URL's
//
// Build: go build -o /etc/cairn/plugins/30-postgres ./plugins/postgres
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"cairn.dev/sdk/plugin"
	"github.com/jackc/pgx/v5"
)

func main() {
	ext := plugin.New()
	ext.RegisterSecretSource("postgres-table", readSecret)
	ext.RegisterDynamicSecretSource("postgres-role", mintLogin)
	plugin.Serve(ext)
}

// connect opens one connection as the plugin's account; made per call so nothing idles open.
func connect(ctx context.Context) (*pgx.Conn, *url.URL, error) {
	raw := os.Getenv("SERVICE_PLUGIN_PG_URL")
	if raw == "" {
		return nil, nil, errors.New("the postgres plugin needs SERVICE_PLUGIN_PG_URL in the server's environment")
	}
	parsed, err := url.Parse(raw)
	if err != nil || (parsed.Scheme != "postgres" && parsed.Scheme != "postgresql") {
		return nil, nil, errors.New("SERVICE_PLUGIN_PG_URL: expected a postgres:// URL")
	}
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		// pgx's error may quote the URL; name the server only.
		return nil, nil, fmt.Errorf("connecting to PostgreSQL at %s: %s", parsed.Host, redact(err.Error(), parsed))
	}
	return conn, parsed, nil
}

// redact removes the URL's password from a message that might quote it.
func redact(msg string, u *url.URL) string {
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "[redacted]")
	}
	return msg
}

// readSecret is the static engine: one row of the secrets table by name.
func readSecret(ctx context.Context, ref string) (string, error) {
	if strings.TrimSpace(ref) == "" {
		return "", errors.New("ref: expected the name of a stored secret")
	}
	table := os.Getenv("SERVICE_PLUGIN_PG_TABLE")
	if table == "" {
		table = "cairn_secrets"
	}
	conn, _, err := connect(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var value string
	err = conn.QueryRow(ctx, "SELECT value FROM "+pgx.Identifier(strings.Split(table, ".")).Sanitize()+" WHERE name = $1", ref).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%s holds no secret named %q", table, ref)
	}
	if err != nil {
		return "", fmt.Errorf("reading %q from %s: %w", ref, table, err)
	}
	return value, nil
}

// mintLogin is the dynamic engine: a login role for the run, in the group role ref names.
func mintLogin(ctx context.Context, ref, runID string) (*plugin.SecretLease, error) {
	group := strings.TrimSpace(ref)
	if group == "" {
		return nil, errors.New("ref: expected the group role whose privileges the run's login gets")
	}
	ttl := time.Hour
	if s := os.Getenv("SERVICE_PLUGIN_PG_ROLE_TTL"); s != "" {
		parsed, err := time.ParseDuration(s)
		if err != nil || parsed <= 0 {
			return nil, fmt.Errorf("SERVICE_PLUGIN_PG_ROLE_TTL: expected a positive Go duration such as 30m, got %q", s)
		}
		ttl = parsed
	}
	conn, admin, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	name := "cairn_run_" + randomHex(8)
	password := randomHex(24)
	until := time.Now().Add(ttl).UTC().Format(time.RFC3339)
	// Identifiers and literals are quoted by pgx; the password is hex and the time is RFC 3339.
	create := fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' VALID UNTIL '%s' IN ROLE %s",
		pgx.Identifier{name}.Sanitize(), password, until, pgx.Identifier{group}.Sanitize())
	if _, err := conn.Exec(ctx, create); err != nil {
		return nil, fmt.Errorf("minting a login in group role %q: %s", group, strings.ReplaceAll(err.Error(), password, "[redacted]"))
	}
	// The run's label on the role, for whoever lists roles (COMMENT takes no parameters).
	comment := strings.ReplaceAll("Cairn run "+runID+" until "+until, "'", "")
	_, _ = conn.Exec(ctx, fmt.Sprintf("COMMENT ON ROLE %s IS '%s'", pgx.Identifier{name}.Sanitize(), comment))

	login := *admin
	login.User = url.UserPassword(name, password)
	if host := os.Getenv("SERVICE_PLUGIN_PG_LOGIN_HOST"); host != "" {
		login.Host = host
	}
	revoke := func(ctx context.Context) error { return dropLogin(ctx, name) }
	return plugin.NewSecretLease(login.String(), name, ttl, revoke), nil
}

// dropLogin ends the login's sessions and drops it (what it owns is reassigned to the plugin's account first).
func dropLogin(ctx context.Context, name string) error {
	conn, _, err := connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name); err != nil {
		return fmt.Errorf("ending the sessions of %s: %w", name, err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "REASSIGN OWNED BY "+ident+" TO CURRENT_USER; DROP OWNED BY "+ident+"; DROP ROLE IF EXISTS "+ident); err != nil {
		return fmt.Errorf("dropping %s: %w", name, err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
