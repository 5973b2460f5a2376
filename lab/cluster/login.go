package cluster

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/pgsession"
)

// NodeRole is the login the lab's lock-mode nodes run as (bench, chaos): a
// member of the schema's node role, as a service's nodes are
// (docs/security.md). The schema's functions ring a node's doorbell as the
// owner role, which may signal a node login's sessions (pg_signal_backend) but,
// like every role but a superuser, not a superuser's: nodes running as the
// harness's superuser would exercise the heartbeat fallback instead of the
// doorbell.
const NodeRole = "pgleader_lab_node"

// NodeLogin returns dsn logging in as NodeRole, created (once per server:
// roles are the cluster's) and made a member of dsn's node role. When that is
// not possible (a role that may not create roles, password authentication) it
// returns dsn itself and says why.
func NodeLogin(ctx context.Context, dsn string) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := connectPath(ctx, dsn)
	if err != nil {
		return dsn, fmt.Sprintf("nodes run as the DSN's login: %v", err)
	}
	defer conn.Close(context.Background())
	var node string
	if err := conn.QueryRow(ctx, "SELECT role_name FROM pgleader.roles WHERE kind = 'node'").Scan(&node); err != nil {
		return dsn, fmt.Sprintf("nodes run as the DSN's login: the node role: %v", err)
	}
	ident := pgx.Identifier{NodeRole}.Sanitize()
	for _, q := range []string{
		"DO $$ BEGIN CREATE ROLE " + ident + " LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
		"GRANT " + pgx.Identifier{node}.Sanitize() + " TO " + ident,
		// The nodes' own workload (--work-interval), as a DBA grants a
		// service's login the demo table (docs/security.md).
		"GRANT INSERT ON pgleader.demo_actions TO " + ident,
		"GRANT USAGE ON SEQUENCE pgleader.demo_actions_id_seq TO " + ident,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return dsn, fmt.Sprintf("nodes run as the DSN's login: %s: %v", q, err)
		}
	}
	as, err := withUser(dsn, NodeRole)
	if err != nil {
		return dsn, fmt.Sprintf("nodes run as the DSN's login: %v", err)
	}
	c, err := connectPath(ctx, as)
	if err != nil {
		return dsn, fmt.Sprintf("nodes run as the DSN's login: %s cannot log in: %v", NodeRole, err)
	}
	c.Close(context.Background())
	return as, ""
}

// connectPath connects with the search_path every session of ours starts with.
func connectPath(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	return pgsession.Connect(ctx, cfg)
}

// withUser returns dsn (a URL or key=value pairs) logging in as user, without
// a password.
func withUser(dsn, user string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		u.User = url.User(user)
		return u.String(), nil
	}
	return dsn + " user=" + user + " password=''", nil
}
