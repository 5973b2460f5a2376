package election_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/lab/pgtest"
	"github.com/pgleader/pgleader/lab/testnode"
)

func startCluster(t *testing.T, dsn string, r *recorder, n int, scopes ...string) []*testnode.Node {
	t.Helper()
	var nodes []*testnode.Node
	for i := range n {
		cfg := testnode.FastConfig(dsn, fmt.Sprintf("n%d", i+1), scopes...)
		nodes = append(nodes, testnode.Start(t, cfg, r.Observe))
	}
	return nodes
}

func waitOneLeader(t *testing.T, nodes []*testnode.Node, scope string) *testnode.Node {
	t.Helper()
	var l *testnode.Node
	pgtest.WaitFor(t, "exactly one leader of "+scope, 10*time.Second, func() bool {
		ls := leaders(nodes, scope)
		if len(ls) > 1 {
			t.Fatalf("%d leaders of %s at once", len(ls), scope)
		}
		if len(ls) == 1 {
			l = ls[0]
		}
		return l != nil
	})
	return l
}

func without(nodes []*testnode.Node, x *testnode.Node) []*testnode.Node {
	var out []*testnode.Node
	for _, n := range nodes {
		if n != x {
			out = append(out, n)
		}
	}
	return out
}

func TestElection(t *testing.T) {
	pgtest.Slow(t)
	t.Run("FiveCandidatesOneLeader", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		r := &recorder{}
		nodes := startCluster(t, dsn, r, 5, "s")
		l := waitOneLeader(t, nodes, "s")
		// Followers observe the leader.
		pgtest.WaitFor(t, "followers observing the leader", 5*time.Second, func() bool {
			return r.count("", election.EventObserved) >= 4
		})
		for range 20 { // stays stable: no second grant while it lives
			if ls := leaders(nodes, "s"); len(ls) != 1 || ls[0] != l {
				t.Fatalf("leadership moved or doubled without a fault: %d leaders", len(ls))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n := queryInt(t, dsn, "SELECT count(*) FROM pgleader.terms WHERE scope='s'"); n != 1 {
			t.Fatalf("%d terms after a contested start, want 1 (one grant)", n)
		}
		if e := queryInt(t, dsn, "SELECT epoch FROM pgleader.leader_state WHERE scope='s'"); e != 1 {
			t.Fatalf("epoch %d, want 1", e)
		}
		// Hand over through every node in turn by shutting leaders down: epochs
		// stay dense, each granted once.
		rest := nodes
		for k := 2; k <= 5; k++ {
			l.Stop()
			rest = without(rest, l)
			l = waitOneLeader(t, rest, "s")
			if e := queryInt(t, dsn, "SELECT epoch FROM pgleader.leader_state WHERE scope='s'"); e != int64(k) {
				t.Fatalf("after handover %d epoch is %d", k-1, e)
			}
		}
		if n := queryInt(t, dsn, "SELECT count(*) FROM pgleader.terms WHERE scope='s' AND release_reason='shutdown'"); n != 4 {
			t.Errorf("%d terms closed as shutdown, want 4", n)
		}
		if gaps := queryInt(t, dsn, "SELECT count(*) FROM generate_series(1,5) g WHERE NOT EXISTS (SELECT 1 FROM pgleader.terms WHERE scope='s' AND epoch=g)"); gaps != 0 {
			t.Errorf("epochs 1..5 have %d gaps", gaps)
		}
		assertNoOverlap(t, r, "s")
	})

	t.Run("ResignHandsOver", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		r := &recorder{}
		nodes := startCluster(t, dsn, r, 3, "s")
		l := waitOneLeader(t, nodes, "s")
		sub := make(chan election.Event, 64)
		remove := l.Observe(func(ev election.Event) {
			if ev.Kind == election.EventElected || ev.Kind == election.EventRevoked {
				sub <- ev
			}
		})
		defer remove()
		if err := l.Scope("s").Resign(context.Background()); err != nil {
			t.Fatalf("Resign: %v", err)
		}
		if l.Leads("s") {
			t.Fatal("still leader after Resign returned")
		}
		next := waitOneLeader(t, without(nodes, l), "s")
		if next == l {
			t.Fatal("resigning node took the scope back")
		}
		// The elected event of epoch 1 may reach an observer that came after
		// the gate opened (it is emitted just after): skip it.
		deadline := time.After(5 * time.Second)
	revoked:
		for {
			select {
			case tr := <-sub:
				if tr.Kind == election.EventElected && tr.Epoch == 1 && tr.Holder == l.NodeID() {
					continue
				}
				if tr.Kind != election.EventRevoked || tr.Reason != "resigned" || tr.Epoch != 1 || tr.Token.Epoch != 1 || tr.Token.Valid() {
					t.Fatalf("event %+v, want revoked/resigned epoch 1 with its ended token", tr)
				}
				break revoked
			case <-deadline:
				t.Fatal("no revoked event delivered")
			}
		}
		var reason string
		c, _ := pgx.Connect(context.Background(), dsn)
		defer c.Close(context.Background())
		if err := c.QueryRow(context.Background(), "SELECT release_reason FROM pgleader.terms WHERE scope='s' AND epoch=1").Scan(&reason); err != nil || reason != "resigned" {
			t.Fatalf("term 1 reason %q (%v), want resigned", reason, err)
		}
		if err := l.Scope("s").Resign(context.Background()); !errors.Is(err, election.ErrNotLeader) {
			t.Fatalf("Resign by a follower: %v, want ErrNotLeader", err)
		}
		assertNoOverlap(t, r, "s")
	})

	t.Run("TerminatedBackendNoOverlap", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		r := &recorder{}
		nodes := startCluster(t, dsn, r, 3, "s")
		for round := range 5 {
			l := waitOneLeader(t, nodes, "s")
			tok, err := l.Scope("s").Require(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// Work in flight under the old term sees its context cancelled.
			doCtx := make(chan context.Context, 1)
			doDone := make(chan error, 1)
			go func() {
				doDone <- l.Scope("s").Do(context.Background(), func(ctx context.Context, _ election.Token) error {
					doCtx <- ctx
					<-ctx.Done()
					return ctx.Err()
				})
			}()
			ctx := <-doCtx
			exec(t, dsn, "SELECT pg_terminate_backend(holder_pid) FROM pgleader.leader_state WHERE scope='s'")
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
				t.Fatalf("round %d: Do's context not cancelled after the leadership backend was terminated", round)
			}
			if err := <-doDone; !errors.Is(err, context.Canceled) {
				t.Fatalf("Do returned %v", err)
			}
			var next *testnode.Node
			pgtest.WaitFor(t, "a new epoch's leader", 10*time.Second, func() bool {
				for _, n := range nodes {
					if tk, err := n.Scope("s").Require(context.Background()); err == nil && tk.Epoch > tok.Epoch {
						next = n
						return true
					}
				}
				return false
			})
			if tok.Valid() {
				t.Fatalf("round %d: old token still valid after epoch %d began", round, tok.Epoch+1)
			}
			// The old term's fenced write is refused.
			c, err := pgx.Connect(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			tx, _ := c.Begin(context.Background())
			err = election.Fence(context.Background(), tx, tok)
			tx.Rollback(context.Background())
			c.Close(context.Background())
			if !errors.Is(err, election.ErrFenced) {
				t.Fatalf("round %d: fence with stale epoch %d: %v, want ErrFenced", round, tok.Epoch, err)
			}
			_ = next
		}
		assertNoOverlap(t, r, "s")
		if e := queryInt(t, dsn, "SELECT epoch FROM pgleader.leader_state WHERE scope='s'"); e < 6 {
			t.Fatalf("epoch %d after 5 takeovers, want ≥ 6", e)
		}
	})

	t.Run("MultiScope", func(t *testing.T) {
		dsn := pgtest.MigratedDSN(t)
		r := &recorder{}
		scopes := []string{"a", "b", "c", "d"}
		first := startCluster(t, dsn, r, 1, scopes...)[0]
		for _, s := range scopes {
			waitOneLeader(t, []*testnode.Node{first}, s)
		}
		cfg := testnode.FastConfig(dsn, "n2", scopes...)
		second := testnode.Start(t, cfg, r.Observe)
		pgtest.WaitFor(t, "follower observing all scopes", 5*time.Second, func() bool {
			return r.count("n2", election.EventObserved) >= len(scopes)
		})
		// All scopes ride on one leadership session: one backend holds all locks.
		if n := queryInt(t, dsn, "SELECT count(DISTINCT holder_pid) FROM pgleader.leader_state"); n != 1 {
			t.Fatalf("scopes held by %d backends, want 1", n)
		}
		first.Stop()
		for _, s := range scopes {
			if got := waitOneLeader(t, []*testnode.Node{second}, s); got != second {
				t.Fatalf("scope %s not taken over", s)
			}
		}
		for _, s := range scopes {
			assertNoOverlap(t, r, s)
		}
	})

	t.Run("DatabaseRestartEpochNeverRegresses", func(t *testing.T) {
		if testing.Short() {
			t.Skip("restarts a private server")
		}
		srv := pgtest.NewServer(t)
		ctx := context.Background()
		if err := srv.CreateDatabase(ctx, "app"); err != nil {
			t.Fatal(err)
		}
		dsn := srv.DSN("app")
		cfg, _ := pgx.ParseConfig(dsn)
		if _, err := migrationsUp(cfg); err != nil {
			t.Fatal(err)
		}
		r := &recorder{}
		nodes := startCluster(t, dsn, r, 3, "s")
		last := int64(0)
		for round := range 3 {
			l := waitOneLeader(t, nodes, "s")
			tok, _ := l.Scope("s").Require(ctx)
			if tok.Epoch <= last {
				t.Fatalf("round %d: epoch %d after %d — regressed", round, tok.Epoch, last)
			}
			last = tok.Epoch
			mode := []string{"immediate", "fast", "immediate"}[round]
			if err := srv.Stop(mode); err != nil {
				t.Fatal(err)
			}
			pgtest.WaitFor(t, "gates closed while the database is down", 5*time.Second, func() bool {
				return len(leaders(nodes, "s")) == 0
			})
			if err := srv.Boot(ctx); err != nil {
				t.Fatal(err)
			}
		}
		l := waitOneLeader(t, nodes, "s")
		tok, _ := l.Scope("s").Require(ctx)
		if tok.Epoch <= last {
			t.Fatalf("epoch %d after restarts, last seen %d — regressed", tok.Epoch, last)
		}
		assertNoOverlap(t, r, "s")
	})
}

func TestConfigValidate(t *testing.T) {
	base := func() election.Config {
		return election.Config{DSN: "postgres://x", NodeID: "n", Scopes: []string{"s"}}
	}
	long := make([]byte, 201) // one byte over the limit
	for i := range long {
		long[i] = 'x'
	}
	cases := []struct {
		name  string
		edit  func(*election.Config)
		field string
	}{
		{"Defaults", func(*election.Config) {}, ""},
		{"EmptyDSNMeansEnvironment", func(c *election.Config) { c.DSN = "" }, ""},
		{"StandaloneNeedsNoDSN", func(c *election.Config) { c.DSN = ""; c.Mode = election.ModeStandalone }, ""},
		{"NoScopes", func(c *election.Config) { c.Scopes = nil }, "Scopes"},
		{"EmptyScope", func(c *election.Config) { c.Scopes = []string{""} }, "Scopes"},
		{"LongScope", func(c *election.Config) { c.Scopes = []string{string(long)} }, "Scopes"},
		{"NULScope", func(c *election.Config) { c.Scopes = []string{"a\x00b"} }, "Scopes"},
		{"BadUTF8", func(c *election.Config) { c.Scopes = []string{"\xff"} }, "Scopes"},
		{"Duplicate", func(c *election.Config) { c.Scopes = []string{"a", "a"} }, "Scopes"},
		{"TooMany", func(c *election.Config) { c.MaxScopes = 2; c.Scopes = []string{"a", "b", "c"} }, "Scopes"},
		{"DSNAndConnConfig", func(c *election.Config) { c.ConnConfig, _ = pgx.ParseConfig("postgres://u@h/d") }, "ConnConfig"},
		{"FencedTxIdleFraction", func(c *election.Config) { c.FencedTxIdleTimeout = 1500 * time.Microsecond }, "FencedTxIdleTimeout"},
		{"EscapeInNode", func(c *election.Config) { c.NodeID = "n\x1b[2J" }, "NodeID"},
		{"BidiInNode", func(c *election.Config) { c.NodeID = "n\u202e" }, "NodeID"},
		{"EscapeInScope", func(c *election.Config) { c.Scopes = []string{"ok", "s\x1b[31m"} }, "Scopes"},
		{"NewlineInScope", func(c *election.Config) { c.Scopes = []string{"s\nfake"} }, "Scopes"},
		{"PrintableUnicode", func(c *election.Config) { c.NodeID = "zürich-東京"; c.Scopes = []string{"billing · eu", `a\b`} }, ""},
		{"IPlusTNotBelowW", func(c *election.Config) { c.TrustWindow = time.Second }, "TrustWindow"},
		{"WNotBelowL", func(c *election.Config) { c.SessionLease = 1500 * time.Millisecond }, "SessionLease"},
		{"GapTooSmall", func(c *election.Config) { c.SessionLease = 1550 * time.Millisecond }, "SessionLease"},
		{"TinyInterval", func(c *election.Config) { c.HeartbeatInterval = time.Millisecond }, "HeartbeatInterval"},
		{"StrayLockKey", func(c *election.Config) { c.LockKeys = map[string]int64{"zz": 1} }, "LockKeys"},
		{"Preferred", func(c *election.Config) { c.FailbackAfter = 30 * time.Second }, ""},
		{"PreferredNegative", func(c *election.Config) { c.FailbackAfter = -time.Second }, "FailbackAfter"},
		{"PreferredTooSoon", func(c *election.Config) { c.FailbackAfter = time.Second }, "FailbackAfter"},
		{"PreferredObserver", func(c *election.Config) { c.FailbackAfter = 30 * time.Second; c.NeverLead = true }, "FailbackAfter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *election.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, election.ErrInvalidConfig) {
				t.Fatalf("Validate: %v, want a ConfigError for %s", err, tc.field)
			}
		})
	}
	t.Run("RuleNamesValues", func(t *testing.T) {
		c := base()
		c.HeartbeatInterval, c.HeartbeatTimeout, c.TrustWindow = time.Second, time.Second, 1500*time.Millisecond
		err := c.Validate()
		want := "TrustWindow: heartbeat interval (1s) + heartbeat timeout (1s) must be shorter than trust window (1.5s)"
		if err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Fatalf("error %q, want it to start with %q", err, want)
		}
	})
}

// TestValidateScopeName: scope names that would act on a terminal are refused
// with one line naming the field, the character (as an escape), its position
// and the rule.
func TestValidateScopeName(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // substring of the error; "" for a valid name
	}{
		{"Plain", "billing-eu_01.v2", ""},
		{"Spaces", "billing eu", ""},
		{"Unicode", "zürich · 東京 ✔", ""},
		{"Backslash", `DOMAIN\host \x1b`, ""},
		{"ZeroWidthJoiner", "👩\u200d💻", `invisible format character \u200d at character 2`},
		{"ZeroWidthSpace", "bill\u200bing", `scope name "bill\u200bing" has the invisible format character \u200b at character 5: use printable characters only`},
		{"WordJoiner", "a\u2060", `invisible format character \u2060 at character 2`},
		{"InvisiblePlus", "a\u2064b", `invisible format character \u2064`},
		{"BOM", "\ufeffab", `invisible format character \ufeff at character 1`},
		{"SoftHyphen", "a\u00adb", `invisible format character \u00ad`},
		{"Tag", "a\U000e0041", `invisible format character \U000e0041`},
		{"ESC", "a\x1b[2Jb", `scope name "a\x1b[2Jb" has the control character \x1b at character 2: use printable characters only`},
		{"TAB", "a\tb", `control character \t at character 2`},
		{"CR", "\rab", `control character \r at character 1`},
		{"LF", "ab\n", `control character \n at character 3`},
		{"BEL", "ab\a", `control character \x07 at character 3`},
		{"DEL", "é\x7f", `control character \x7f at character 2`},
		{"C1CSI", "a\u009b2J", `control character \u009b at character 2`},
		{"C1NEL", "a\u0085", `control character \u0085 at character 2`},
		{"RLO", "abc\u202egpj.exe", `text-direction control \u202e at character 4`},
		{"LRE", "\u202aab", `text-direction control \u202a at character 1`},
		{"PDF", "ab\u202c", `text-direction control \u202c`},
		{"Isolate", "a\u2066b\u2069", `text-direction control \u2066 at character 2`},
		{"RLM", "a\u200f", `text-direction control \u200f`},
		{"LRM", "a\u200e", `text-direction control \u200e`},
		{"LineSeparator", "a\u2028b", `line separator \u2028`},
		{"NUL", "a\x00b", "NUL byte"},
		{"BadUTF8", "a\x9bb", "not valid UTF-8"},
		{"Empty", "", "must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := election.Config{DSN: "postgres://x", NodeID: "n", Scopes: []string{tt.in}}
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate of scope %q: %v", tt.in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate of scope %q = %v, want it to contain %q", tt.in, err, tt.want)
			}
			for _, r := range err.Error() {
				if termsafe.Unsafe(r) || unicode.Is(unicode.Cf, r) {
					t.Fatalf("the error carries %U raw: %q", r, err)
				}
			}
		})
	}
	t.Run("NodeIDZeroWidth", func(t *testing.T) {
		c := election.Config{NodeID: "n\u200b", Scopes: []string{"s"}}
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), `NodeID: node id "n\u200b" has the invisible format character \u200b at character 2`) {
			t.Fatalf("Validate: %v", err)
		}
	})
	t.Run("NodeIDNamed", func(t *testing.T) {
		c := election.Config{NodeID: "n\x1bx", Scopes: []string{"s"}}
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), `NodeID: node id "n\x1bx" has the control character \x1b at character 2`) {
			t.Fatalf("Validate: %v", err)
		}
	})
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	fresh := pgtest.DSN(t)
	e, err := election.New(election.Config{DSN: fresh, NodeID: "n", Scopes: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Check(ctx); !errors.Is(err, election.ErrSchemaMissing) {
		t.Fatalf("Check on an unmigrated database: %v, want ErrSchemaMissing", err)
	}
	if err := e.Run(ctx); !errors.Is(err, election.ErrSchemaMissing) {
		t.Fatalf("Run on an unmigrated database: %v, want ErrSchemaMissing", err)
	}
	e, _ = election.New(election.Config{DSN: "postgres://postgres@127.0.0.1:1/x?connect_timeout=2", NodeID: "n", Scopes: []string{"s"}})
	if err := e.Check(ctx); !errors.Is(err, election.ErrUnreachable) {
		t.Fatalf("Check on a closed port: %v, want ErrUnreachable", err)
	}
	if _, err := election.New(election.Config{DSN: "postgres://bad host:x", NodeID: "n", Scopes: []string{"s"}}); !errors.Is(err, election.ErrInvalidConfig) {
		t.Fatalf("New with a malformed DSN: %v, want ErrInvalidConfig", err)
	}
}
