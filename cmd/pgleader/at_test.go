package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestParseAt(t *testing.T) {
	now := time.Date(2026, 11, 27, 3, 30, 0, 0, time.UTC)
	local := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04:05.000", s, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		in   string
		want time.Time
	}{
		{"2026-11-27T03:12:04.250Z", time.Date(2026, 11, 27, 3, 12, 4, 250e6, time.UTC)},
		{"2026-11-27T03:12:04+01:00", time.Date(2026, 11, 27, 2, 12, 4, 0, time.UTC)},
		{"2026-11-27 03:12:04", local("2026-11-27 03:12:04.000")},
		{"2026-11-27 03:12:04.250", local("2026-11-27 03:12:04.250")},
		{"2026-11-27T03:12:04.5", local("2026-11-27 03:12:04.500")},
		{"-15m", now.Add(-15 * time.Minute)},
	} {
		got, err := parseAt("at", c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("parseAt(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "03:12", "2026-13-01 00:00:00", "-0s", "15m"} {
		_, err := parseAt("at", bad, now)
		if err == nil || !strings.HasPrefix(err.Error(), "--at ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("parseAt(%q): %v; want one line naming --at", bad, err)
		}
	}
}

// TestStatusAt: status --at, top --at --once and history --until against
// real nodes, at an instant before the leader was killed.
func TestStatusAt(t *testing.T) {
	pgtest.Slow(t)
	dsn, c := startNodes(t, "billing", "n1", "n2")
	var leader string
	pgtest.WaitEvery(t, "a leader with a follower", 20*time.Second, 100*time.Millisecond, func() bool {
		r := pgleader(t, nil, "status", "--dsn", dsn, "-o", "tsv")
		// Not TrimSpace: a row whose last columns are empty (no follower yet,
		// no alert) ends in tabs, and its fields must stay eight.
		lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
		if r.code != 0 || len(lines) != 2 {
			return false
		}
		f := strings.Split(lines[1], "\t")
		if len(f) != 8 {
			t.Fatalf("status tsv: %d fields, want 8: %q", len(f), lines[1])
		}
		leader = f[2]
		return f[1] == "OK" && f[6] != ""
	})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var before time.Time
	if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&before); err != nil {
		t.Fatal(err)
	}
	at := before.UTC().Format(time.RFC3339Nano)
	if _, err := c.Node(leader).Kill(); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"n1": "n2", "n2": "n1"}[leader]
	pgtest.WaitEvery(t, "the takeover", 20*time.Second, 100*time.Millisecond, func() bool {
		r := pgleader(t, nil, "status", "--dsn", dsn, "-o", "tsv")
		return strings.Contains(r.stdout, "billing\tDEGRADED\t"+other+"\t2\t")
	})

	r := pgleader(t, nil, "status", "--dsn", dsn, "--at", at)
	first := strings.SplitN(r.stdout, "\n", 2)[0]
	if r.code != 0 || !strings.HasPrefix(first, "REPLAY ") || !strings.Contains(first, "cannot be rebuilt") ||
		!strings.Contains(r.stdout, leader+"@") {
		t.Fatalf("status --at: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = pgleader(t, nil, "status", "--dsn", dsn, "--at", at, "-o", "json")
	var st struct {
		Scopes []struct {
			Leader string `json:"leader"`
			Epoch  int64  `json:"epoch"`
		} `json:"scopes"`
		Replay *struct {
			At      time.Time `json:"at"`
			Unknown []string  `json:"unknown"`
		} `json:"replay"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || len(st.Scopes) != 1 ||
		st.Scopes[0].Leader != leader || st.Scopes[0].Epoch != 1 || st.Replay == nil || !st.Replay.At.Equal(before) ||
		len(st.Replay.Unknown) == 0 {
		t.Fatalf("status --at -o json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	r = pgleader(t, nil, "status", "--dsn", dsn, "-o", "json")
	if strings.Contains(r.stdout, `"replay"`) {
		t.Errorf("live status -o json carries a replay object:\n%s", r.stdout)
	}
	r = pgleader(t, nil, "top", "--once", "--width", "100", "--dsn", dsn, "--at", at)
	if r.code != 0 || !strings.HasPrefix(r.stdout, " ⏮ REPLAY ") || !strings.Contains(r.stdout, "✔ OK billing") {
		t.Fatalf("top --at --once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = pgleader(t, nil, "history", "--dsn", dsn, "--until", at, "-o", "tsv")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "\t"+leader+"\t") {
		t.Fatalf("history --until: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	for _, bad := range [][]string{{"--at", "yesterday"}, {"--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}} {
		r = pgleader(t, nil, append([]string{"status", "--dsn", dsn}, bad...)...)
		if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "--at") {
			t.Errorf("status %q: exit %d, stderr %q; want 2 and one line naming --at", bad, r.code, r.stderr)
		}
	}
}

func TestParseWindow(t *testing.T) {
	now := time.Date(2026, 11, 27, 3, 30, 0, 0, time.UTC)
	w, err := parseWindow("1h", "2026-11-27T03:20:00Z", now)
	if err != nil || w.since != time.Hour || !w.until.Equal(now.Add(-10*time.Minute)) {
		t.Errorf("1h to 03:20: %+v, %v", w, err)
	}
	if w, err = parseWindow("2026-11-27T03:00:00Z", "", now); err != nil || !w.from.Equal(now.Add(-30*time.Minute)) || w.since != 0 {
		t.Errorf("since a TIME: %+v, %v", w, err)
	}
	if w, err = parseWindow("-1h", "", now); err != nil || w.since != time.Hour {
		t.Errorf("since -1h: %+v, %v", w, err)
	}
	for _, bad := range [][2]string{{"soon", ""}, {"", "soon"}, {"2026-11-27T03:20:00Z", "2026-11-27T03:10:00Z"}} {
		if _, err := parseWindow(bad[0], bad[1], now); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("parseWindow(%q, %q): %v; want a one-line error", bad[0], bad[1], err)
		}
	}
}
