package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/lab/pgtest"
)

// hostile is what someone who can write the database (or run a node) may put
// in a name: a screen clear, a window title, a colour, CR, LF and TAB that would
// forge a line, a row or a column, a right-to-left override and an isolate, DEL
// and the C1 CSI.
const hostile = "\x1b[2J\x1b]0;pwned\x07\x1b[31m\r\n\tX\u202eY\u2066\x7f\u009b"

// evil returns base with the hostile payload in the middle.
func evil(base string) string { return base + hostile + "-" + base }

// assertInert fails unless out is UTF-8 without a control character other than
// the view's own line breaks (and tabs when allowTab, for TSV), without DEL, C1
// or a text-direction control, and shows the payload escaped.
func assertInert(t *testing.T, what, out string, allowTab bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: not UTF-8: %q", what, out)
	}
	for i, r := range out {
		if r == '\n' || (allowTab && r == '\t') {
			continue
		}
		if termsafe.Unsafe(r) {
			t.Errorf("%s: %U at byte %d reaches the terminal raw:\n%q", what, r, i, out)
			return
		}
	}
	if !strings.Contains(out, `\x1b[2J\x1b]0;pwned\x07`) {
		t.Errorf("%s: the payload is not shown escaped:\n%s", what, out)
	}
}

// assertTSV fails unless out has exactly rows lines (header included) of cols
// columns each.
func assertTSV(t *testing.T, what, out string, rows, cols int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != rows {
		t.Fatalf("%s: %d rows, want %d:\n%s", what, len(lines), rows, out)
	}
	for i, l := range lines {
		if n := len(strings.Split(l, "\t")); n != cols {
			t.Fatalf("%s: row %d has %d columns, want %d: %q", what, i, n, cols, l)
		}
	}
}

// hostileSnapshot is scaleSnapshot with every string the database controls
// replaced by a hostile one; plain is the same picture with plain names.
func hostileSnapshot() (hostileSnap, plain *collector.Snapshot) {
	plain = scaleSnapshot(3, 2, 1)
	plain.Health.Source, plain.Health.LastError = collector.SourceDisconnected, "read failed"
	s := scaleSnapshot(3, 2, 1)
	s.Health.Source, s.Health.LastError = collector.SourceDisconnected, evil("read failed")
	s.Health.Database = evil("app")
	for i := range s.Nodes {
		s.Nodes[i].ID, s.Nodes[i].Hostname, s.Nodes[i].Version = evil(s.Nodes[i].ID), evil("host"), evil("v1")
	}
	for i := range s.Scopes {
		sc := &s.Scopes[i]
		sc.Name = evil(sc.Name)
		if sc.Leader != "" {
			sc.Leader, sc.LeaderHost = evil(sc.Leader), evil("host")
		}
		for k := range sc.Followers {
			sc.Followers[k] = evil(sc.Followers[k])
		}
		for k := range sc.Alerts {
			a := &sc.Alerts[k]
			a.Scope, a.Summary, a.Hint = sc.Name, evil("summary"), evil("hint")
		}
	}
	s.Alerts = nil
	for _, sc := range s.Scopes {
		s.Alerts = append(s.Alerts, sc.Alerts...)
	}
	s.Alerts = append(s.Alerts, collector.Alert{Kind: collector.AlertStaleNode, Severity: collector.SeverityWarning,
		Node: s.Nodes[0].ID, Summary: evil("not seen"), Hint: evil("is it alive"), Runbook: "docs/runbooks.md#stale_node"})
	plain.Alerts = append(plain.Alerts, collector.Alert{Kind: collector.AlertStaleNode, Severity: collector.SeverityWarning,
		Node: plain.Nodes[0].ID, Summary: "not seen", Hint: "is it alive", Runbook: "docs/runbooks.md#stale_node"})
	return s, plain
}

// TestStatusEscapesHostileNames: status prints names, hosts and alert texts of
// the database through termsafe: the table has the lines of the same picture
// with plain names, the TSV its rows and columns, and the JSON is exact yet
// inert.
func TestStatusEscapesHostileNames(t *testing.T) {
	snap, plain := hostileSnapshot()

	t.Run("Table", func(t *testing.T) {
		var got, want bytes.Buffer
		writeStatus(&got, snap, nil, cli.FormatTable)
		writeStatus(&want, plain, nil, cli.FormatTable)
		assertInert(t, "status table", got.String(), false)
		if g, w := strings.Count(got.String(), "\n"), strings.Count(want.String(), "\n"); g != w {
			t.Fatalf("%d lines, %d with plain names:\n%s", g, w, got.String())
		}
		if !strings.Contains(got.String(), `scope-0000\x1b[2J\x1b]0;pwned\x07\x1b[31m\r\n\tX\u202eY\u2066\x7f\u009b-scope-0000`) {
			t.Fatalf("the scope's name is not shown escaped:\n%s", got.String())
		}
	})
	t.Run("TSV", func(t *testing.T) {
		var b bytes.Buffer
		writeStatus(&b, snap, nil, cli.FormatTSV)
		assertInert(t, "status tsv", b.String(), true)
		assertTSV(t, "status tsv", b.String(), 1+len(snap.Scopes), 8)
	})
	t.Run("JSON", func(t *testing.T) {
		var b bytes.Buffer
		writeStatus(&b, snap, nil, cli.FormatJSON)
		assertNoRawControl(t, b.String())
		var doc struct {
			Scopes []collector.Scope `json:"scopes"`
			Nodes  []collector.Node  `json:"nodes"`
		}
		if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Scopes[0].Name != snap.Scopes[0].Name || doc.Nodes[0].Hostname != snap.Nodes[0].Hostname {
			t.Fatalf("JSON must stay exact: %q, %q", doc.Scopes[0].Name, doc.Nodes[0].Hostname)
		}
	})
}

// TestHistoryEscapesHostileNames: the same for history's table, TSV and JSON.
func TestHistoryEscapesHostileNames(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	terms := []collector.Term{
		{Scope: evil("billing"), Epoch: 2, Holder: evil("n2"), Hostname: evil("host"), AcquiredAt: t0, HeldFor: time.Minute},
		{Scope: evil("billing"), Epoch: 1, Holder: evil("n1"), Hostname: evil("host"), AcquiredAt: t0.Add(-time.Hour),
			ReleasedAt: t0, EndedBy: election.Reason(evil("crashed")), HandedTo: evil("n2"), HeldFor: time.Hour,
			Run: &collector.TermRun{Key: evil("2026-03-01")}}, // --once-key is the caller's text
	}
	render := func(t *testing.T, format string) string {
		t.Helper()
		var b bytes.Buffer
		if err := writeTerms(&b, terms, format); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	t.Run("Table", func(t *testing.T) {
		out := render(t, cli.FormatTable)
		assertInert(t, "history table", out, false)
		if n := strings.Count(out, "\n"); n != 1+len(terms) {
			t.Fatalf("%d lines, want %d:\n%s", n, 1+len(terms), out)
		}
	})
	t.Run("TSV", func(t *testing.T) {
		out := render(t, cli.FormatTSV)
		assertInert(t, "history tsv", out, true)
		assertTSV(t, "history tsv", out, 1+len(terms), 14) // 11, then last_sign, silent and child_exit
	})
	t.Run("JSON", func(t *testing.T) {
		out := render(t, cli.FormatJSON)
		assertNoRawControl(t, out)
		var back []collector.Term
		if err := json.Unmarshal([]byte(out), &back); err != nil || back[1].Holder != terms[1].Holder || back[1].EndedBy != terms[1].EndedBy ||
			back[1].HandedTo != terms[1].HandedTo {
			t.Fatalf("JSON must stay exact: %+v, %v", back, err)
		}
	})
}

// TestControlCharactersRefused: every argument that names a scope or a node
// refuses control and text-direction characters as bad input (exit 2, one line
// naming the character), before anything connects.
func TestControlCharactersRefused(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"NodeID", []string{"node", "--scope", "a", "--id", "a\x1b[2Jb"}, `invalid configuration: NodeID: node id "a\x1b[2Jb" has the control character \x1b at character 2`},
		{"NodeIDBidi", []string{"node", "--scope", "a", "--id", "ab\u202e"}, `text-direction control \u202e at character 3`},
		{"NodeScope", []string{"node", "--scope", "a", "--scope", "b\tc"}, `invalid configuration: Scopes: scope name "b\tc" has the control character \t at character 2`},
		{"NodeScopeNewline", []string{"node", "--scope", "b\nc"}, `control character \n`},
		{"StatusScope", []string{"status", "--scope", "s\x1b[31m"}, `--scope "s\x1b[31m": scope name`},
		{"HistoryScope", []string{"history", "--scope", "s\r"}, `control character \r`},
		{"ResignScope", []string{"resign", "s\u2066x"}, `text-direction control \u2066`},
		{"NodeIDZeroWidthSpace", []string{"node", "--scope", "a", "--id", "n\u200b1"}, `invalid configuration: NodeID: node id "n\u200b1" has the invisible format character \u200b at character 2`},
		{"NodeScopeBOM", []string{"node", "--scope", "\ufeffa"}, `invisible format character \ufeff at character 1`},
		{"StatusScopeWordJoiner", []string{"status", "--scope", "s\u2060"}, `--scope "s\u2060": scope name "s\u2060" has the invisible format character \u2060`},
		{"HandoverScopeZWNJ", []string{"handover", "s\u200cx", "--to", "n"}, `invisible format character \u200c`},
		{"HandoverToZeroWidth", []string{"handover", "s", "--to", "n\u200b"}, `invisible format character \u200b`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := pgleader(t, nil, append(tt.args, "--dsn", unreachable)...)
			if r.code != cli.ExitBadInput {
				t.Errorf("exit %d, want %d (%s)", r.code, cli.ExitBadInput, r.stderr)
			}
			line, ok := strings.CutSuffix(r.stderr, "\n")
			if !ok || strings.Contains(line, "\n") || !strings.Contains(line, tt.want) || !strings.Contains(line, "use printable characters") {
				t.Errorf("stderr %q, want one line containing %q", r.stderr, tt.want)
			}
			assertNoRawControl(t, r.stderr)
		})
	}
}

func assertNoRawControl(t *testing.T, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && termsafe.Unsafe(r) {
			t.Fatalf("%U reaches the terminal raw: %q", r, out)
		}
	}
}

// TestHostileRowsEndToEnd: rows written straight into the pgleader tables (no
// validation on that path) come out inert through the real collector and every
// command that prints them.
func TestHostileRowsEndToEnd(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	conn := pgtest.Connect(t, dsn)
	scope, node, host := evil("scope"), evil("node"), evil("host")
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO pgleader.leader_state (scope, lock_key, epoch, released_at) VALUES ($1, pgleader.lock_key($1), 1, now() - interval '30 seconds')`, []any{scope}},
		{`INSERT INTO pgleader.terms (scope, epoch, holder, hostname, holder_pid, acquired_at, released_at, release_reason, handed_to)
		  VALUES ($1, 1, $2, $3, 4242, now() - interval '2 minutes', now() - interval '30 seconds', 'handed_over', $4)`, []any{scope, node, host, evil("next")}},
		{`INSERT INTO pgleader.nodes (node_id, hostname, os_pid, version, scopes) VALUES ($1, $2, 4242, $3, ARRAY[$4])`,
			[]any{node, host, evil("v1"), scope}},
		{`INSERT INTO pgleader.audit (scope, node_id, epoch, kind, detail) VALUES ($1, $2, 1, 'evicted', jsonb_build_object('by', $3::text, 'reason', $3::text, 'pid', 4242))`,
			[]any{scope, node, hostile}},
	} {
		if _, err := conn.Exec(context.Background(), q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		r := pgleader(t, nil, append(args, "--dsn", dsn)...)
		if r.code != 0 && r.code != cli.ExitNoLeader {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		assertNoRawControl(t, r.stderr)
		return r.stdout
	}
	out := run("status")
	assertInert(t, "status", out, false)
	if !strings.Contains(out, `scope\x1b[2J`) {
		t.Errorf("status does not show the scope:\n%s", out)
	}
	assertTSV(t, "status -o tsv", run("status", "-o", "tsv"), 2, 8)
	assertInert(t, "status -o tsv", run("status", "-o", "tsv"), true)
	assertNoRawControl(t, run("status", "-o", "json"))
	out = run("history")
	assertInert(t, "history", out, false)
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("history: %d lines, want 2:\n%s", n, out)
	}
	assertTSV(t, "history -o tsv", run("history", "-o", "tsv"), 2, 14)
	assertInert(t, "history -o tsv", run("history", "-o", "tsv"), true)
	assertNoRawControl(t, run("history", "-o", "json"))
	out = run("top", "--once", "--width", "200")
	assertInert(t, "top --once", out, false)
	assertNoRawControl(t, run("top", "--once", "-o", "json"))
}
