package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/tui"
)

// RefreshFigures are the refreshes of `pgleader top` over some databases of a
// forged fleet. Read is every database read at once, through its running
// collector, and for several databases the merge (Fleet.Poll); Render is a
// dashboard taking that snapshot and drawing a frame; Total is both: one full
// refresh.
type RefreshFigures struct {
	Databases int             `json:"databases"`
	Scopes    int             `json:"scopes"`
	Nodes     int             `json:"nodes"`
	Read      []time.Duration `json:"-"`
	Render    []time.Duration `json:"-"`
	Total     []time.Duration `json:"-"`
	// HeapMiB is the live Go heap after a GC with the collectors running and
	// the last snapshot held (the benchmark's own few MiB included, the same
	// in both runs); RSSMiB the process's resident set at that moment.
	HeapMiB float64 `json:"heap_mib"`
	RSSMiB  float64 `json:"rss_mib"`
	// CPU is this process's CPU time (user + system) per refresh: the
	// collectors' and the dashboard's share, not the server's.
	CPU time.Duration `json:"cpu_per_refresh_ns"`
}

// DashboardFleetResult is what DashboardFleet measured: one database of the
// fleet, then all of them, in the same run.
type DashboardFleetResult struct {
	Interval time.Duration  `json:"interval_ns"`
	One      RefreshFigures `json:"one"`
	Fleet    RefreshFigures `json:"fleet"`
}

// DashboardFleet times n full refreshes of `pgleader top` over the first
// database of f alone (a Collector, the one-database path), then over every
// database of f (a collector.Fleet), one refresh per interval, and the memory
// each holds. The collectors' own ticks are set far apart while it measures,
// so that the only reads are the refreshes it times; the forged fleet's
// heartbeats go on. The frame is width×height, colours on.
func DashboardFleet(ctx context.Context, f *ForgedFleet, interval time.Duration, n, width, height int, logf func(string, ...any)) (DashboardFleetResult, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	res := DashboardFleetResult{Interval: interval}
	newCollector := func(i int) (*collector.Collector, error) {
		cfg := collector.DefaultConfig()
		cfg.ConnConfig, cfg.PollInterval = f.Configs[i], collector.MaxPollInterval
		cfg.Logger = slog.New(slog.DiscardHandler)
		return collector.New(cfg)
	}
	one, err := newCollector(0)
	if err != nil {
		return res, err
	}
	if res.One, err = refreshes(ctx, one, 1, interval, n, width, height, logf); err != nil {
		return res, fmt.Errorf("one database: %w", err)
	}
	var members []collector.FleetMember
	for i, name := range f.Names {
		c, err := newCollector(i)
		if err != nil {
			return res, err
		}
		members = append(members, collector.FleetMember{Name: name, Collector: c})
	}
	fleet, err := collector.NewFleet(members, collector.FleetConfig{UnreachableAfter: time.Hour})
	if err != nil {
		return res, err
	}
	if res.Fleet, err = refreshes(ctx, fleet, len(members), interval, n, width, height, logf); err != nil {
		return res, fmt.Errorf("fleet: %w", err)
	}
	return res, nil
}

// refreshFeed is what refreshes runs and reads: a Collector or a Fleet.
type refreshFeed interface {
	tui.Feed
	Run(context.Context) error
	Poll(context.Context) (*collector.Snapshot, error)
}

// refreshes runs feed and times n refreshes, one per interval (two more
// first, to warm up).
func refreshes(ctx context.Context, feed refreshFeed, dbs int, interval time.Duration, n, width, height int, logf func(string, ...any)) (RefreshFigures, error) {
	fig := RefreshFigures{Databases: dbs}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- feed.Run(runCtx) }()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(60 * time.Second)
	ready := func(s *collector.Snapshot) bool {
		if s == nil {
			return false
		}
		for _, d := range s.Databases {
			if !d.Up() {
				return false
			}
		}
		return true
	}
	for s := feed.Snapshot(); !ready(s); s = feed.Snapshot() {
		if time.Now().After(deadline) {
			return fig, errors.New("no snapshot within 60s")
		}
		select {
		case <-ctx.Done():
			return fig, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	var snap *collector.Snapshot
	var cpu0 time.Duration
	next := time.Now()
	for i := range n + 2 {
		if i == 2 {
			cpu0 = cpuTime()
		}
		select {
		case <-ctx.Done():
			return fig, ctx.Err()
		case <-time.After(time.Until(next)):
		}
		next = next.Add(interval)
		start := time.Now()
		s, err := feed.Poll(ctx)
		if err != nil {
			return fig, err
		}
		read := time.Since(start)
		start = time.Now()
		drawFrame(s, width, height)
		render := time.Since(start)
		snap = s
		if i < 2 {
			continue
		}
		fig.Read, fig.Render, fig.Total = append(fig.Read, read), append(fig.Render, render), append(fig.Total, read+render)
		logf("top over %d database(s): refresh %d/%d: read %v, render %v", dbs, i-1, n, read, render)
	}
	fig.CPU = (cpuTime() - cpu0) / time.Duration(n)
	fig.Scopes, fig.Nodes = len(snap.Scopes), len(snap.Nodes)
	fig.HeapMiB = float64(liveHeap()) / (1 << 20)
	fig.RSSMiB = float64(rss()) / (1 << 20)
	return fig, nil
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// drawFrame is a dashboard receiving s and drawing one frame of w×h.
func drawFrame(s *collector.Snapshot, w, h int) {
	m := tui.New(staticFeed{s}, tui.Options{Now: func() time.Time { return s.At }, Theme: tui.ThemeDark})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	_ = m.View()
	m.Update(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}) // quit: ends its context
}

// staticFeed serves one snapshot.
type staticFeed struct{ s *collector.Snapshot }

func (f staticFeed) Snapshot() *collector.Snapshot { return f.s }
func (f staticFeed) Updates() (<-chan *collector.Snapshot, func()) {
	ch := make(chan *collector.Snapshot)
	close(ch)
	return ch, func() {}
}
func (f staticFeed) Subscribe(int) (<-chan collector.Event, func()) {
	ch := make(chan collector.Event)
	close(ch)
	return ch, func() {}
}
func (staticFeed) Refresh()                      {}
func (staticFeed) SetPollInterval(time.Duration) {}
func (staticFeed) PollInterval() time.Duration   { return time.Second }
