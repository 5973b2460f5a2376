package demo

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/operator"
	"github.com/pgleader/pgleader/tui"
)

var escapes = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// stillFeed is a tui.Feed with one snapshot that never changes.
type stillFeed struct{ snap *collector.Snapshot }

func (f stillFeed) Snapshot() *collector.Snapshot { return f.snap }
func (f stillFeed) Updates() (<-chan *collector.Snapshot, func()) {
	return make(chan *collector.Snapshot), func() {}
}
func (f stillFeed) Subscribe(int) (<-chan collector.Event, func()) {
	return make(chan collector.Event), func() {}
}
func (stillFeed) Refresh()                      {}
func (stillFeed) SetPollInterval(time.Duration) {}
func (stillFeed) PollInterval() time.Duration   { return time.Second }

// dashboard is the demo's dashboard at w×h, with its options over an
// operator that never acts (no database needed), showing an empty snapshot.
func dashboard(t *testing.T, dsn string, w, h int) *tui.Model {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	op, err := operator.New(operator.Config{ConnConfig: cc})
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{scopes: []string{"billing", "reports"}, notes: make(chan string, 1)}
	m := tui.New(stillFeed{&collector.Snapshot{Seq: 1, At: time.Now()}}, dashboardOptions(dsn, l, op, Options{NoColor: true}))
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

func view(m *tui.Model) string { return escapes.ReplaceAllString(m.View().Content, "") }

// TestDashboardActions: the demo's dashboard has its actions without a flag,
// lists them in the footer and the help, and refuses them on a scope that is
// not the demo's.
func TestDashboardActions(t *testing.T) {
	m := dashboard(t, "postgres://postgres@127.0.0.1:5432/pgleader?sslmode=disable", 120, 40)
	if s := view(m); !strings.Contains(s, "R resign  x evict  O handover") {
		t.Errorf("footer lacks the actions:\n%s", s)
	}
	m.Update(tea.KeyPressMsg{Code: '?', Text: "?"})
	s := view(m)
	for _, want := range []string{"actions (asks y/N)", "R resign the leader gracefully", "x evict: terminate leader's session", "O hand over to the best follower"} {
		if !strings.Contains(s, want) {
			t.Errorf("help lacks %q:\n%s", want, s)
		}
	}

	a := dashboardActions{scopes: []string{"billing"}} // no operator: a refusal must not reach it
	ctx := context.Background()
	for name, err := range map[string]error{
		"evict":    a.Evict(ctx, "payroll", "test"),
		"resign":   a.Resign(ctx, "payroll", "test"),
		"handover": a.Handover(ctx, "payroll", "node-2", "test"),
	} {
		if err == nil || !strings.Contains(err.Error(), "not one of the demo's scopes") {
			t.Errorf("%s of a foreign scope: %v", name, err)
		}
	}
}

// TestDashboardDSN: the header shows the DSN with its user and without its
// password, and c puts that DSN on the clipboard.
func TestDashboardDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://postgres@127.0.0.1:54321/pgleader?sslmode=disable": "postgres://postgres@127.0.0.1:54321/pgleader?sslmode=disable",
		"postgres://ops:s3cret@db.example:5432/app":                    "postgres://ops@db.example:5432/app",
	} {
		m := dashboard(t, dsn, 80, 24)
		s := view(m)
		if !strings.Contains(s, "dsn "+want) || strings.Contains(s, "s3cret") {
			t.Errorf("%s: header:\n%s", dsn, s)
		}
		if !strings.Contains(s, "c copy DSN") {
			t.Errorf("%s: footer lacks the copy key:\n%s", dsn, s)
		}
		_, cmd := m.Update(tea.KeyPressMsg{Code: 'c', Text: "c"})
		if cmd == nil {
			t.Fatalf("%s: c does nothing", dsn)
		}
		// tea.SetClipboard's message is unexported: a string type.
		if msg := cmd(); fmt.Sprintf("%T", msg) != "tea.setClipboardMsg" || fmt.Sprint(msg) != want {
			t.Errorf("%s: c sends %T %v, want the clipboard set to %s", dsn, msg, msg, want)
		}
	}
}

// TestDashboardLook: the demo's dashboard takes --theme's colours and
// replays the demo database's past ([), as pgleader top does.
func TestDashboardLook(t *testing.T) {
	l := &lab{scopes: []string{"billing"}, notes: make(chan string, 1)}
	for _, th := range []tui.Theme{tui.ThemeAuto, tui.ThemeLight, tui.ThemeDark} {
		o := dashboardOptions("postgres://postgres@127.0.0.1:5432/pgleader", l, nil, Options{Theme: th})
		if o.Theme != th || o.NoColor {
			t.Errorf("--theme %q: the dashboard gets %q (no colour %v)", th, o.Theme, o.NoColor)
		}
		if r, ok := o.Replay.(replayer); !ok || r.dsn != "postgres://postgres@127.0.0.1:5432/pgleader" {
			t.Errorf("the dashboard replays %#v", o.Replay)
		}
	}
}
