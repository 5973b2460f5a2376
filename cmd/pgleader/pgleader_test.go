package main

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/migrations"
)

func TestHelp(t *testing.T) {
	global := []string{"--dsn", "--log-format", "--log-level"}
	tests := []struct {
		args  []string
		flags []string
		also  []string // defaults and other text that must appear
	}{
		{[]string{"--help"}, global, []string{"DATABASE_URL", "PG*", "migrate", "node", "Examples:", `(default "text")`, `(default "info")`}},
		{[]string{"migrate", "--help"}, global, []string{"Examples:", "pgleader migrate --dsn"}},
		{[]string{"node", "--help"}, append([]string{"--scope", "--id", "--heartbeat-interval", "--heartbeat-timeout",
			"--trust-window", "--session-lease", "--drain-timeout", "--events", "--work-interval", "--version-tag"}, global...),
			[]string{"Examples:", "pgleader node --dsn", "(default 500ms)", "(default 1.5s)", "(default 2s)", "(default 5s)",
				"(default 0: no workload)", "(default <hostname>-<pid>-<6 random hex>)", "SIGTERM"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := pgleader(t, nil, tt.args...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
			}
			for _, want := range append(tt.flags, tt.also...) {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("help does not mention %q:\n%s", want, r.stdout)
				}
			}
		})
	}
}

// unreachable is a DSN nothing listens on; configuration errors must be reported
// before any connection attempt, so they use it.
const unreachable = "postgres://postgres@127.0.0.1:1/x?connect_timeout=2"

func TestBadInput(t *testing.T) {
	pgtest.Slow(t)
	fresh := pgtest.DSN(t) // a database without the pgleader schema
	migrated := pgtest.MigratedDSN(t)
	eventsPath := filepath.Join(t.TempDir(), "events.jsonl")
	// Events paths another user could have prepared: a link to a file of ours,
	// a file anyone may write.
	unsafeDir := t.TempDir()
	eventsVictim, eventsLink, eventsOpen := filepath.Join(unsafeDir, "victim"), filepath.Join(unsafeDir, "link.jsonl"), filepath.Join(unsafeDir, "open.jsonl")
	if err := os.Symlink(eventsVictim, eventsLink); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(eventsOpen, nil, 0o600); err != nil || os.Chmod(eventsOpen, 0o666) != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  []string
		args []string
		want []string // substrings of the single stderr line
	}{
		{"MalformedDSN", nil, []string{"node", "--scope", "a", "--dsn", "postgres://bad host:x"},
			[]string{"invalid connection string from --dsn", "fix it"}},
		{"MalformedDSNMigrate", nil, []string{"migrate", "--dsn", "postgres://bad host:x"},
			[]string{"invalid connection string from --dsn", "fix it"}},
		{"MalformedDatabaseURL", []string{"DATABASE_URL=postgres://bad host:x"}, []string{"migrate"},
			[]string{"invalid connection string from DATABASE_URL"}},
		// Unreachable is not bad input: exit 6 (cli.ExitUnreachable).
		{"Unreachable", nil, []string{"node", "--scope", "a", "--dsn", unreachable},
			[]string{"database unreachable", "127.0.0.1:1", "check --dsn"}},
		{"UnreachableMigrate", nil, []string{"migrate", "--dsn", unreachable},
			[]string{"database unreachable", "127.0.0.1:1", "check --dsn"}},
		{"UnreachableFromPGVariables", []string{"PGHOST=127.0.0.1", "PGPORT=1", "PGCONNECT_TIMEOUT=2"}, []string{"migrate"},
			[]string{"database unreachable", "127.0.0.1:1", "check --dsn"}},
		{"MissingSchema", nil, []string{"node", "--scope", "a", "--dsn", fresh, "--events", eventsPath},
			[]string{"no pgleader schema", "run `pgleader migrate`"}},
		{"EmptyScope", nil, []string{"node", "--scope", "", "--dsn", unreachable},
			[]string{"invalid configuration: Scopes:", "must not be empty", "--scope"}},
		{"LongScope", nil, []string{"node", "--scope", strings.Repeat("s", 300), "--dsn", unreachable},
			[]string{"invalid configuration: Scopes:", "300 bytes", "limit of 200", "--scope"}},
		{"DuplicateScope", nil, []string{"node", "--scope", "a", "--scope", "a", "--dsn", unreachable},
			[]string{"invalid configuration: Scopes:", "listed twice"}},
		{"UnsafeTiming", nil, []string{"node", "--scope", "a", "--trust-window", "500ms", "--dsn", unreachable},
			[]string{"invalid configuration: TrustWindow:", "must be shorter than trust window (500ms)", "--trust-window"}},
		{"LeaseTooShort", nil, []string{"node", "--scope", "a", "--session-lease", "1.55s", "--dsn", unreachable},
			[]string{"invalid configuration: SessionLease:", "at least 100ms", "--session-lease"}},
		{"PreferredTooSoon", nil, []string{"node", "--scope", "a", "--preferred=1s", "--dsn", unreachable},
			[]string{"invalid configuration: FailbackAfter:", "four heartbeat intervals", "--preferred"}},
		{"PreferredObserver", nil, []string{"node", "--scope", "a", "--preferred", "--priority", "0", "--dsn", unreachable},
			[]string{"invalid configuration: FailbackAfter:", "priority 0 never leads", "--preferred"}},
		{"EmptyID", nil, []string{"node", "--scope", "a", "--id", "", "--dsn", unreachable},
			[]string{"invalid configuration: NodeID:", "--id"}},
		{"NegativeWorkInterval", nil, []string{"node", "--scope", "a", "--work-interval", "-1s", "--dsn", unreachable},
			[]string{"--work-interval", "0 for no workload"}},
		{"NegativeIdleSessions", nil, []string{"bench", "holder", "--key", "1", "--idle-sessions", "-1", "--dsn", unreachable},
			[]string{"--idle-sessions must be ≥ 0", "got -1"}},
		{"MissingScope", nil, []string{"node", "--dsn", unreachable},
			[]string{`required flag(s) "scope" not set`, "pgleader node --help"}},
		{"UnknownFlag", nil, []string{"node", "--scope", "a", "--bogus"},
			[]string{"unknown flag: --bogus", "pgleader node --help"}},
		{"BadDuration", nil, []string{"node", "--scope", "a", "--trust-window", "soon"},
			[]string{"--trust-window", "pgleader node --help"}},
		{"UnknownCommand", nil, []string{"lead"}, []string{`unknown command "lead"`, "pgleader --help"}},
		{"BadLogFormat", nil, []string{"migrate", "--log-format", "xml", "--dsn", unreachable},
			[]string{`invalid --log-format "xml"`, "text or json"}},
		{"BadLogLevel", nil, []string{"migrate", "--log-level", "loud", "--dsn", unreachable},
			[]string{`invalid --log-level "loud"`}},
		{"EventsUnwritable", nil, []string{"node", "--scope", "a", "--dsn", migrated, "--events", "/nonexistent/dir/e.jsonl"},
			[]string{"cannot use --events /nonexistent/dir/e.jsonl", "writable file"}},
		{"ListenAbstractSocket", nil, []string{"node", "--scope", "a", "--dsn", migrated, "--listen", "unix:@pgleader"},
			[]string{"--listen unix:@pgleader", "abstract socket", "use a path, e.g. unix:/run/pgleader/pgleader.sock"}},
		{"ListenAbstractSocketRun", nil, []string{"run", "--scope", "a", "--dsn", migrated, "--listen", "unix:@x", "--", "true"},
			[]string{"--listen unix:@x", "abstract socket"}},
		{"ListenMaxStreams", nil, []string{"node", "--scope", "a", "--dsn", migrated, "--listen", "127.0.0.1:0", "--listen-max-streams", "0"},
			[]string{"--listen-max-streams (0)", "at least 1"}},
		{"EventsSymlink", nil, []string{"node", "--scope", "a", "--dsn", migrated, "--events", eventsLink},
			[]string{"--events", eventsLink, "symbolic link", "regular file"}},
		{"EventsWorldWritable", nil, []string{"node", "--scope", "a", "--dsn", migrated, "--events", eventsOpen},
			[]string{"--events", "mode 0666", "chmod 600 " + eventsOpen}},
		{"DemoScopeCount", nil, []string{"demo", "--headless", "--scopes", "0"},
			[]string{"--scopes must be between 1 and 10000 (got 0)"}},
		{"DemoScopesAndCount", nil, []string{"demo", "--headless", "--scope", "a", "--scopes", "3"},
			[]string{"scope", "scopes", "pgleader demo --help"}},
		{"DemoTheme", nil, []string{"demo", "--theme", "solarized"},
			[]string{"--theme must be light, dark or auto", `"solarized"`}},
		{"DemoTooManyNames", nil, append([]string{"demo", "--headless"}, strings.Split(strings.Repeat("--scope x ", 17), " ")[:34]...),
			[]string{"between 1 and 16 scopes (got 17)", "--scopes N"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := pgleader(t, tt.env, tt.args...)
			want := cli.ExitBadInput
			if strings.HasPrefix(tt.name, "Unreachable") {
				want = cli.ExitUnreachable // the same one line, and its own exit code
			}
			if r.code != want {
				t.Errorf("exit %d, want %d", r.code, want)
			}
			line, ok := strings.CutSuffix(r.stderr, "\n")
			if !ok || strings.Contains(line, "\n") || !strings.HasPrefix(line, "pgleader: ") {
				t.Errorf("stderr is not one line starting with \"pgleader: \":\n%s", r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(line, w) {
					t.Errorf("stderr lacks %q:\n%s", w, line)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}

	t.Run("UnsafeEventsLeftAlone", func(t *testing.T) {
		if _, err := os.Lstat(eventsVictim); !os.IsNotExist(err) {
			t.Errorf("the file behind the events link was created (%v)", err)
		}
		if fi, err := os.Stat(eventsOpen); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o666 {
			t.Errorf("the world-writable events file was changed: %v %v", fi, err)
		}
	})

	t.Run("MissingSchemaLeavesNothing", func(t *testing.T) {
		if _, err := os.Stat(eventsPath); !os.IsNotExist(err) {
			t.Errorf("events file exists after a failed start (%v)", err)
		}
		conn := pgtest.Connect(t, fresh)
		var n int
		if err := conn.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_namespace WHERE nspname = 'pgleader'").Scan(&n); err != nil || n != 0 {
			t.Errorf("schema pgleader: count %d, err %v; want none", n, err)
		}
	})
}

func TestPasswordNeverPrinted(t *testing.T) {
	const pw = "s3cr3t-pw"
	for _, dsn := range []string{
		"postgres://u:" + pw + "@bad host:x/db",
		"postgres://u:" + pw + "@127.0.0.1:1/db?connect_timeout=2",
		"host=127.0.0.1 port=1 user=u password=" + pw + " connect_timeout=2",
		"host=127.0.0.1 port=x password=" + pw,
	} {
		for _, cmd := range [][]string{{"migrate"}, {"node", "--scope", "a"}} {
			r := pgleader(t, nil, append(cmd, "--dsn", dsn)...)
			if (r.code != cli.ExitBadInput && r.code != cli.ExitUnreachable) || strings.Contains(r.stderr+r.stdout, pw) {
				t.Errorf("%v with %s: exit %d, output:\n%s%s", cmd, strings.ReplaceAll(dsn, pw, "…"), r.code, r.stdout, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "pgleader: warning: --dsn holds a password") || !strings.Contains(r.stderr, "~/.pgpass") {
				t.Errorf("%v with a password in --dsn: no warning first:\n%s", cmd, r.stderr)
			}
		}
		r := pgleader(t, []string{"DATABASE_URL=" + dsn}, "migrate")
		if strings.Contains(r.stderr+r.stdout, pw) || strings.Contains(r.stderr, "warning") {
			t.Errorf("DATABASE_URL: output shows the password, or warns:\n%s", r.stderr)
		}
	}
}

// TestRedactPasswordFragments: a password holding '@', ':', '/', '%', a quote or
// a space — which ends a URL's user information early, or pgx's masking — shows
// no fragment in any command's output, the connection string malformed or the
// server unreachable; each command exits 2 with one line.
func TestRedactPasswordFragments(t *testing.T) {
	words := []string{"hunter", "kiwi", "mango", "papaya"}
	dsns := []string{
		"postgres://u:hunter@kiwi@127.0.0.1:1/db?connect_timeout=2",
		"postgres://u:hunter@kiwi:mango/papaya%41 x@127.0.0.1:1/db",
		"postgres://u:hunter/kiwi@127.0.0.1:1/db?connect_timeout=2",
		"postgres://u:hunter%40kiwi%2Fmango@127.0.0.1:1/db?connect_timeout=2",
		"postgres://u:hunter%ZZkiwi@127.0.0.1:1/db",
		"host=127.0.0.1 port=1 user=u password='hunter kiwi@mango' connect_timeout=2",
		"host=127.0.0.1 port=x user=u password='hunter kiwi@mango'",
		`host=127.0.0.1 port=1 password='hunter\' kiwi' connect_timeout=x`,
		`host=127.0.0.1 port=1 password=hunter\ kiwi connect_timeout=x`,
	}
	cmds := [][]string{{"status"}, {"node", "--scope", "a"}, {"migrate"}, {"exporter", "--listen", "127.0.0.1:0"},
		{"top", "--once"}, {"history"}, {"resign", "a"}}
	for _, dsn := range dsns {
		for _, cmd := range cmds {
			r := pgleader(t, nil, append(cmd, "--dsn", dsn)...)
			out := r.stdout + r.stderr
			for _, w := range words {
				if strings.Contains(out, w) {
					t.Errorf("%v with %s: output shows %q of the password:\n%s", cmd, dsn, w, out)
				}
			}
			warning, rest, _ := strings.Cut(r.stderr, "\n")
			if (r.code != cli.ExitBadInput && r.code != cli.ExitUnreachable) || !strings.HasPrefix(warning, "pgleader: warning: --dsn holds a password") || strings.Count(rest, "\n") != 1 {
				t.Errorf("%v with %s: exit %d, want 2 or 6 and one line after the password warning:\n%s", cmd, dsn, r.code, r.stderr)
			}
		}
	}
}

func TestNULScope(t *testing.T) {
	// argv cannot carry a NUL byte, so the validation behind --scope is tested
	// directly: the same flags → config → message path as the command.
	f := nodeFlags{scopes: []string{"a\x00b"}}
	cfg := f.config(unreachable)
	err := cfg.Validate()
	if cli.ExitCode(err) != cli.ExitBadInput {
		t.Fatalf("exit code %d for %v", cli.ExitCode(err), err)
	}
	if msg := cli.Message(err); !strings.Contains(msg, "invalid configuration: Scopes:") || !strings.Contains(msg, "NUL") {
		t.Fatalf("message %q", msg)
	}
}

func TestMigrate(t *testing.T) {
	pgtest.Slow(t)
	t.Run("Twice", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		r := pgleader(t, nil, "migrate", "--dsn", dsn)
		files, err := fs.Glob(migrations.FS(), "*.sql")
		if err != nil || len(files) != migrations.Latest-migrations.Baseline+1 {
			t.Fatalf("embedded numbered files %v (%v), want %d (the baseline and one per version after it)", files, err, migrations.Latest-migrations.Baseline+1)
		}
		rep, err := migrations.Repeatables()
		if err != nil || len(rep) < 50 {
			t.Fatalf("embedded repeatable files: %d (%v)", len(rep), err)
		}
		const roles = "roles: owner pgleader_owner · node pgleader_node · reader pgleader_reader · operator pgleader_operator (grant them to login roles: docs/security.md)\n"
		if r.code != 0 || r.stdout != fmt.Sprintf("pgleader schema: version 0 → %d (applied %s)\nfunctions and views: %d files applied (new or changed)\n",
			migrations.Latest, strings.Join(files, ", "), len(rep))+roles {
			t.Fatalf("first: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
		}
		// The second run takes the database from DATABASE_URL.
		r = pgleader(t, []string{"DATABASE_URL=" + dsn}, "migrate")
		if r.code != 0 || r.stdout != fmt.Sprintf("pgleader schema: already at version %d\n", migrations.Latest)+roles {
			t.Fatalf("second: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
		}
		var v int
		if err := pgtest.Connect(t, dsn).QueryRow(context.Background(), "SELECT pgleader.schema_version()").Scan(&v); err != nil || v != migrations.Latest {
			t.Fatalf("schema_version %d, %v", v, err)
		}
	})

	t.Run("FromPGVariables", func(t *testing.T) {
		u, err := url.Parse(pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		r := pgleader(t, []string{"PGHOST=" + u.Hostname(), "PGPORT=" + u.Port(), "PGUSER=" + u.User.Username(),
			"PGDATABASE=" + strings.TrimPrefix(u.Path, "/"), "PGSSLMODE=disable"}, "migrate")
		if r.code != 0 || !strings.HasPrefix(r.stdout, fmt.Sprintf("pgleader schema: version 0 → %d", migrations.Latest)) {
			t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("ConcurrentStress", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		const procs = 4
		results := make([]result, procs)
		var wg sync.WaitGroup
		for i := range procs {
			wg.Go(func() { results[i] = pgleader(t, nil, "migrate", "--dsn", dsn) })
		}
		wg.Wait()
		applied := 0
		for i, r := range results {
			switch {
			case r.code != 0:
				t.Errorf("process %d: exit %d, stderr %s", i, r.code, r.stderr)
			case strings.HasPrefix(r.stdout, fmt.Sprintf("pgleader schema: version 0 → %d", migrations.Latest)):
				applied++
			case !strings.HasPrefix(r.stdout, fmt.Sprintf("pgleader schema: already at version %d\nroles: ", migrations.Latest)):
				t.Errorf("process %d: stdout %q", i, r.stdout)
			}
		}
		if applied != 1 {
			t.Errorf("%d processes applied the migration, want exactly 1", applied)
		}
	})
}

func TestNode(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	p := startBinary(t, "node", "--dsn", dsn, "--scope", "a", "--id", "n1",
		"--events", events, "--work-interval", "50ms", "--log-level", "debug")
	cmd, exited := p.cmd, p.exited
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(events)
			t.Logf("events:\n%s", b)
		}
	})

	waitEvents(t, events, exited, "acquired, gate_open, heartbeat_ok and action_ok", func(ls []map[string]any) bool {
		return has(ls, "acquired", "") && has(ls, "gate_open", "") && has(ls, "heartbeat_ok", "") && has(ls, "action_ok", "")
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("node after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("node did not exit within 15s of SIGTERM")
	}

	lines := pgtest.JSONLines(t, events)
	if !has(lines, "resigned", "shutdown") {
		t.Errorf("no resigned event with reason shutdown")
	}
	for i, l := range lines {
		for _, k := range []string{"mono_ns", "time", "node", "scope", "event", "epoch"} {
			if _, ok := l[k]; !ok {
				t.Errorf("line %d lacks %q: %v", i+1, k, l)
			}
		}
		if l["node"] != "n1" {
			t.Errorf("line %d: node %v", i+1, l["node"])
		}
		if ev := l["event"]; ev == "action_unknown" || ev == "action_rejected" || ev == "lost" {
			t.Errorf("line %d: %v during a clean run", i+1, l)
		}
	}

	conn := pgtest.Connect(t, dsn)
	ctx := context.Background()
	var reason *string
	var released bool
	if err := conn.QueryRow(ctx, "SELECT release_reason, released_at IS NOT NULL FROM pgleader.terms WHERE scope = 'a' AND epoch = 1").
		Scan(&reason, &released); err != nil {
		t.Fatal(err)
	}
	if !released || reason == nil || *reason != "shutdown" {
		t.Errorf("term a/1: released %v, reason %v; want released, shutdown", released, deref(reason))
	}
	// Every acknowledged action is a row of its epoch.
	for _, l := range lines {
		if l["event"] != "action_ok" {
			continue
		}
		var epoch int64
		if err := conn.QueryRow(ctx, "SELECT epoch FROM pgleader.demo_actions WHERE request_id = $1", l["request_id"]).Scan(&epoch); err != nil {
			t.Errorf("action_ok %v: %v", l["request_id"], err)
		} else if float64(epoch) != l["epoch"] {
			t.Errorf("action_ok %v: row epoch %d, event epoch %v", l["request_id"], epoch, l["epoch"])
		}
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// has reports a line with event (and reason, when not empty).
func has(lines []map[string]any, event, reason string) bool {
	for _, l := range lines {
		if l["event"] == event && (reason == "" || l["reason"] == reason) {
			return true
		}
	}
	return false
}

// waitEvents polls the events file until cond holds, the process exits, or a
// deadline passes.
func waitEvents(t *testing.T, path string, exited <-chan error, what string, cond func([]map[string]any) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		lines := pgtest.JSONLines(t, path)
		if cond(lines) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the events file within 30s; %d lines", what, len(lines))
		}
		select {
		case err := <-exited:
			t.Fatalf("node exited early (%v) while waiting for %s", err, what)
		case <-tick.C:
		}
	}
}

// syncBuffer collects a child's stderr; exec writes it from its own goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSecretFileWarnings: a password file or a config file holding passwords
// that group or others may read is still used — the command does what it did
// — with one warning naming the file and chmod 600, printed once however many
// targets share the file.
func TestSecretFileWarnings(t *testing.T) {
	pgtest.Slow(t)
	dir := t.TempDir()
	loose := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil || os.Chmod(p, 0o644) != nil {
			t.Fatal(err)
		}
		return p
	}
	pass := loose("pgpass", "*:*:*:*:hunter2\n")
	migrated := pgtest.MigratedDSN(t)

	r := pgleader(t, []string{"PGPASSFILE=" + pass}, "migrate", "--dsn", migrated)
	if r.code != 0 || strings.Count(r.stderr, "chmod 600 "+pass) != 1 || !strings.HasPrefix(r.stderr, "pgleader: warning: password file "+pass) {
		t.Errorf("migrate with a loose PGPASSFILE: exit %d, stderr:\n%s\nwant exit 0 and one warning naming chmod 600 %s", r.code, r.stderr, pass)
	}
	r = pgleader(t, []string{"PGPASSFILE=" + pass}, "status", "--dsn", "postgres://u@127.0.0.1:1/db?connect_timeout=2")
	if lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); r.code != cli.ExitUnreachable || len(lines) != 2 || !strings.HasSuffix(lines[0], "chmod 600 "+pass) {
		t.Errorf("status, unreachable, loose PGPASSFILE: exit %d, stderr:\n%s\nwant exit 6, the warning, then the error", r.code, r.stderr)
	}

	conf := loose("config.yaml", "targets:\n  - {name: a, dsn: 'postgres://u:s3cr3t@127.0.0.1:1/db?connect_timeout=2'}\n  - {name: b, dsn: 'host=127.0.0.1 port=1 password=s3cr3t connect_timeout=2'}\n")
	r = pgleader(t, nil, "status", "--config", conf, "--all-targets")
	if strings.Count(r.stderr, "chmod 600 "+conf) != 1 || strings.Contains(r.stderr+r.stdout, "s3cr3t") {
		t.Errorf("status over a loose config file holding passwords: stderr:\n%s\nwant the chmod 600 warning once, never the password", r.stderr)
	}
}
