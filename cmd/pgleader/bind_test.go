package main

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

// scope bind / unbind / bindings / key, as a DBA and an operator run them: the
// owner binds, others are refused with exit 2 and the fix; status shows the
// binding; a node of another login is refused at start with the scope and role
// named; key records an override only while nobody holds the scope.
func TestScopeBindCommands(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, s := range []string{
		"CREATE ROLE bindtest_svc_a LOGIN IN ROLE pgleader_node",
		"CREATE ROLE bindtest_svc_b LOGIN IN ROLE pgleader_node",
		"CREATE ROLE bindtest_ops LOGIN IN ROLE pgleader_operator",
	} {
		if _, err := admin.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename LIKE 'bindtest\\_%'")
		for _, r := range []string{"svc_a", "svc_b", "ops"} {
			_, _ = admin.Exec(ctx, "DROP OWNED BY bindtest_"+r+" CASCADE")
			_, _ = admin.Exec(ctx, "DROP ROLE IF EXISTS bindtest_"+r)
		}
	})
	as := func(role string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(role)
		return u.String()
	}

	r := pgleader(t, nil, "scope", "bind", "billing", "--role", "bindtest_svc_a", "--dsn", dsn)
	if r.code != 0 || !strings.Contains(r.stdout, "bound billing to bindtest_svc_a") {
		t.Fatalf("bind: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = pgleader(t, nil, "scope", "bind", "--prefix", "billing/", "--role", "bindtest_svc_a", "--dsn", dsn)
	if r.code != 0 {
		t.Fatalf("bind --prefix: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"OperatorMayNotBind", []string{"scope", "bind", "billing", "--role", "bindtest_svc_b", "--dsn", as("bindtest_ops")}, "schema owner"},
		{"UnknownRole", []string{"scope", "bind", "billing", "--role", "nosuchrole_x", "--dsn", dsn}, "nosuchrole_x does not exist"},
		{"NoRole", []string{"scope", "bind", "billing", "--dsn", dsn}, "--role"},
		{"BadKey", []string{"scope", "key", "billing", "12x", "--dsn", dsn}, "64-bit"},
		{"KeyAndDerived", []string{"scope", "key", "billing", "12", "--derived", "--dsn", dsn}, "not both"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := pgleader(t, nil, c.args...)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != 2 || len(lines) != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d, want 2 and one line naming %q:\n%s", r.code, c.want, r.stderr)
			}
		})
	}

	r = pgleader(t, nil, "scope", "bindings", "-o", "json", "--dsn", as("bindtest_ops"))
	var got struct {
		Bindings []struct {
			Prefix bool
			Name   string
			Roles  []string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Bindings) != 2 {
		t.Fatalf("bindings -o json: %v (exit %d)\n%s%s", err, r.code, r.stdout, r.stderr)
	}

	// A node of another login is refused before it campaigns, with the fix.
	r = pgleader(t, nil, "node", "--scope", "billing/cron", "--id", "b-1", "--dsn", as("bindtest_svc_b"))
	if r.code == 0 || !strings.Contains(r.stderr, `may not campaign for scope "billing/cron"`) || !strings.Contains(r.stderr, "bindtest_svc_a") {
		t.Errorf("a node of another login: exit %d, want the binding's refusal:\n%s", r.code, r.stderr)
	}

	// status shows the binding of a scope in view.
	if _, err := admin.Exec(ctx, "SELECT pgleader.register_node('a-1', 'h', 1, 'v', ARRAY['billing'], 50, 300, 500, 1, 2)"); err != nil {
		t.Fatal(err)
	}
	r = pgleader(t, nil, "status", "--dsn", dsn)
	if !strings.Contains(r.stdout, "billing → bindtest_svc_a") {
		t.Errorf("status does not show the binding:\n%s", r.stdout)
	}
	r = pgleader(t, nil, "status", "-o", "json", "--dsn", dsn)
	if !strings.Contains(r.stdout, `"bound_to": [`) {
		t.Errorf("status -o json has no bound_to:\n%s", r.stdout)
	}

	// key: an operator records an override for a scope nobody holds; unbind.
	r = pgleader(t, nil, "scope", "key", "legacy", "4242", "--dsn", as("bindtest_ops"))
	if r.code != 0 || !strings.Contains(r.stdout, "legacy now uses lock key 4242") {
		t.Errorf("key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = pgleader(t, nil, "scope", "unbind", "billing", "--dsn", dsn)
	if r.code != 0 || !strings.Contains(r.stdout, "unbound billing") {
		t.Errorf("unbind: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
