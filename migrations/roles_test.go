package migrations_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// sqlPrivileges lists the effective privileges (membership included) of the node,
// reader and operator roles and of PUBLIC on the schema, its tables (a table read
// through column grants as "table T except C1, C2", naming the columns it may not
// read), sequences and functions, one line per privilege, in the format of
// docs/security.md.
const sqlPrivileges = `
WITH r(role) AS (VALUES ('pgleader_node'), ('pgleader_reader'), ('pgleader_operator'), ('public')),
rel AS (SELECT c.oid, c.relname, c.relkind FROM pg_catalog.pg_class c
         WHERE c.relnamespace = 'pgleader'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S'))
SELECT role || ' ' || priv || ' ' || obj FROM (
  SELECT r.role, pr.priv, 'schema pgleader' AS obj FROM r, (VALUES ('USAGE'), ('CREATE')) pr(priv)
   WHERE has_schema_privilege(r.role, 'pgleader', pr.priv)
  UNION ALL
  SELECT r.role, pr.priv, 'table pgleader.' || rel.relname FROM r, rel,
         (VALUES ('SELECT'), ('INSERT'), ('UPDATE'), ('DELETE'), ('TRUNCATE'), ('REFERENCES'), ('TRIGGER')) pr(priv)
   WHERE rel.relkind <> 'S' AND has_table_privilege(r.role, rel.oid, pr.priv)
  UNION ALL
  -- a table a role reads some columns of: the columns it may not read
  SELECT r.role, 'SELECT', 'table pgleader.' || rel.relname || ' except ' ||
         string_agg(a.attname, ', ' ORDER BY a.attname) FILTER (WHERE NOT has_column_privilege(r.role, rel.oid, a.attnum, 'SELECT'))
    FROM r, rel JOIN pg_catalog.pg_attribute a ON a.attrelid = rel.oid AND a.attnum > 0 AND NOT a.attisdropped
   WHERE rel.relkind <> 'S' AND NOT has_table_privilege(r.role, rel.oid, 'SELECT')
   GROUP BY r.role, rel.relname
  HAVING bool_or(has_column_privilege(r.role, rel.oid, a.attnum, 'SELECT'))
  UNION ALL
  SELECT r.role, pr.priv, 'sequence pgleader.' || rel.relname FROM r, rel, (VALUES ('USAGE'), ('SELECT'), ('UPDATE')) pr(priv)
   WHERE rel.relkind = 'S' AND has_sequence_privilege(r.role, rel.oid, pr.priv)
  UNION ALL
  SELECT DISTINCT r.role, 'EXECUTE', 'function pgleader.' || p.proname FROM r, pg_catalog.pg_proc p
   WHERE p.pronamespace = 'pgleader'::regnamespace AND has_function_privilege(r.role, p.oid, 'EXECUTE')
) x ORDER BY 1`

// The privileges of every role are exactly the list docs/security.md gives, PUBLIC
// has none, and the owner role owns every object of the schema; every function
// pins its search_path.
func TestPrivilegesAsDocumented(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.ConnectConfig(t, setup(t))

	rows, err := conn.Query(ctx, sqlPrivileges)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```privileges\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/security.md has no ```privileges block")
	}
	want := strings.Split(strings.TrimSpace(string(m[1])), "\n")
	slices.Sort(want)
	slices.Sort(got)
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("the database grants %q, which docs/security.md does not list", g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("docs/security.md lists %q, which the database does not grant", w)
		}
	}
	for _, g := range got {
		if strings.HasPrefix(g, "public ") {
			t.Errorf("PUBLIC has %q", g)
		}
		if f := strings.Fields(g); f[1] != "SELECT" && f[1] != "USAGE" && f[1] != "EXECUTE" {
			t.Errorf("a role may write or create directly: %q", g)
		}
	}

	var notOwned []string
	rows, err = conn.Query(ctx, `
SELECT kind || ' ' || name FROM (
  SELECT 'relation' AS kind, c.oid::regclass::text AS name, c.relowner AS owner FROM pg_catalog.pg_class c
   WHERE c.relnamespace = 'pgleader'::regnamespace
  UNION ALL
  SELECT 'function', p.oid::regprocedure::text, p.proowner FROM pg_catalog.pg_proc p
   WHERE p.pronamespace = 'pgleader'::regnamespace
  UNION ALL
  SELECT 'schema', n.nspname::text, n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'pgleader'
) o WHERE o.owner <> 'pgleader_owner'::regrole ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if notOwned, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(notOwned) > 0 {
		t.Errorf("not owned by pgleader_owner: %v", notOwned)
	}
	var unpinned []string
	rows, err = conn.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'pgleader'::regnamespace
		  AND NOT coalesce('search_path=pg_catalog, pgleader, pg_temp' = ANY (p.proconfig), false) ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if unpinned, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(unpinned) > 0 {
		t.Errorf("functions without a pinned search_path: %v", unpinned)
	}
}

// migrate refuses a pgleader schema another role created (with a fence that
// accepts everything), and one that holds another role's object; it changes
// nothing in either case.
func TestUpRefusesForeignSchema(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	admin := pgtest.ConnectConfig(t, cfg)
	role := "mallory_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name()))
	for _, s := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT CREATE ON DATABASE " + cfg.Database + " TO " + role,
	} {
		if _, err := admin.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS pgleader CASCADE")
		_, _ = admin.Exec(ctx, "DROP OWNED BY "+role)
		_, _ = admin.Exec(ctx, "DROP ROLE "+role)
	})
	mcfg := cfg.Copy()
	mcfg.User = role
	mallory := pgtest.ConnectConfig(t, mcfg)
	if _, err := mallory.Exec(ctx, `CREATE SCHEMA pgleader;
		CREATE FUNCTION pgleader.fence(text, bigint, text) RETURNS void LANGUAGE sql AS 'SELECT';
		CREATE FUNCTION pgleader.schema_version() RETURNS int LANGUAGE sql AS 'SELECT 7'`); err != nil {
		t.Fatal(err)
	}
	_, err = migrate.Up(ctx, cfg, nil)
	if !errors.Is(err, migrate.ErrForeignSchema) || !strings.Contains(err.Error(), role) {
		t.Fatalf("Up over %s's schema: %v, want ErrForeignSchema naming the role", role, err)
	}
	if _, err := admin.Exec(ctx, "ALTER SCHEMA pgleader OWNER TO "+cfg.User); err != nil {
		t.Fatal(err)
	}
	_, err = migrate.Up(ctx, cfg, nil)
	if !errors.Is(err, migrate.ErrForeignSchema) || !strings.Contains(err.Error(), "pgleader.fence(text,bigint,text)") {
		t.Fatalf("Up over a schema holding %s's fence: %v, want ErrForeignSchema naming the function", role, err)
	}
	var tables int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = 'pgleader'::regnamespace").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("refused Up left %d relations in the schema", tables)
	}
}

// apply_privileges (run by every migration) takes back what was granted by hand
// to a role other than the four, and keeps the grants docs/security.md asks a DBA
// to make for an application role and the demo workload.
func TestHandGrantsTakenBack(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.ConnectConfig(t, setup(t))
	role := "handgrant_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	for _, s := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA pgleader TO " + role,
		"GRANT EXECUTE ON FUNCTION pgleader.fence(text, bigint, text) TO " + role,
		"GRANT INSERT ON pgleader.demo_actions TO " + role,
		"GRANT USAGE ON SEQUENCE pgleader.demo_actions_id_seq TO " + role,
		// taken back:
		"GRANT SELECT ON pgleader.nodes TO " + role,
		"GRANT UPDATE ON pgleader.leader_state TO " + role,
		"GRANT EXECUTE ON FUNCTION pgleader.request_resign(text, bigint, text) TO " + role,
		"GRANT CREATE ON SCHEMA pgleader TO " + role,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(ctx, "DROP OWNED BY "+role)
		_, _ = conn.Exec(ctx, "DROP ROLE IF EXISTS "+role)
	})
	if _, err := conn.Exec(ctx, "SELECT pgleader.apply_privileges()"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		check string
		want  bool
	}{
		{"has_schema_privilege($1, 'pgleader', 'USAGE')", true},
		{"has_function_privilege($1, 'pgleader.fence(text, bigint, text)', 'EXECUTE')", true},
		{"has_table_privilege($1, 'pgleader.demo_actions', 'INSERT')", true},
		{"has_sequence_privilege($1, 'pgleader.demo_actions_id_seq', 'USAGE')", true},
		{"has_table_privilege($1, 'pgleader.nodes', 'SELECT')", false},
		{"has_table_privilege($1, 'pgleader.leader_state', 'UPDATE')", false},
		{"has_function_privilege($1, 'pgleader.request_resign(text, bigint, text)', 'EXECUTE')", false},
		{"has_schema_privilege($1, 'pgleader', 'CREATE')", false},
	} {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT "+c.check, role).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("after apply_privileges: %s = %v, want %v", c.check, got, c.want)
		}
	}
}
