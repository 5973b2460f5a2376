package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/exporter"
)

// ScrapeFigures are one exporter's figures over a number of databases.
type ScrapeFigures struct {
	Databases int `json:"databases"`
	// Scrape[i] is the i-th GET /metrics, request to last byte (loopback).
	Scrape    []time.Duration `json:"-"`
	ScrapeP50 time.Duration   `json:"scrape_p50_ns"`
	ScrapeP99 time.Duration   `json:"scrape_p99_ns"`
	Series    int             `json:"series"` // pgleader_* samples on the page
	Bytes     int             `json:"bytes"`
	// PollP50 and PollP99: the collectors' full reads (Health.PollDuration of
	// every database's snapshot at each scrape).
	PollP50 time.Duration `json:"poll_p50_ns"`
	PollP99 time.Duration `json:"poll_p99_ns"`
	// HeapMiB is the process's live Go heap after a GC with the collectors and
	// exporter running (the benchmark's own few MiB included, the same in both
	// runs); RSSMiB its resident set at the same moment.
	HeapMiB float64 `json:"heap_mib"`
	RSSMiB  float64 `json:"rss_mib"`
}

// FleetScrapeResult is what FleetScrape measured: the exporter over one
// database of the fleet, then over all of them, in the same run.
type FleetScrapeResult struct {
	Scopes int           `json:"scopes_per_database"`
	Nodes  int           `json:"nodes_per_database"`
	One    ScrapeFigures `json:"one"`
	Fleet  ScrapeFigures `json:"fleet"`
}

// FleetScrape runs a collector per database of f (poll interval 1s, the
// exporter's default) and the exporter over them, and scrapes /metrics n times
// (every 200 ms): first over the first database alone, then over every
// database, so that the fleet's figures stand beside one database's, measured
// on the same server in the same run.
func FleetScrape(ctx context.Context, f *ForgedFleet, scopes, nodes, n int, logf func(string, ...any)) (FleetScrapeResult, error) {
	res := FleetScrapeResult{Scopes: scopes, Nodes: nodes}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		members []exporter.Member
		cols    []*collector.Collector
		done    []chan error
	)
	defer func() {
		cancel()
		for _, d := range done {
			<-d
		}
	}()
	measure := func(upTo int) (ScrapeFigures, error) {
		for i := len(cols); i < upTo; i++ {
			cfg := collector.DefaultConfig()
			cfg.ConnConfig, cfg.PollInterval = f.Configs[i], time.Second
			cfg.Logger = slog.New(slog.DiscardHandler)
			c, err := collector.New(cfg)
			if err != nil {
				return ScrapeFigures{}, err
			}
			d := make(chan error, 1)
			go func() { d <- c.Run(runCtx) }()
			cols, done = append(cols, c), append(done, d)
			members = append(members, exporter.Member{Name: f.Names[i], Source: c})
		}
		if err := waitRead(ctx, cols, scopes); err != nil {
			return ScrapeFigures{}, err
		}
		fleet, err := exporter.NewFleet(members, exporter.Options{})
		if err != nil {
			return ScrapeFigures{}, err
		}
		srv := httptest.NewServer(fleet.Handler(nil))
		defer srv.Close()
		fig := ScrapeFigures{Databases: upTo}
		var polls []time.Duration
		for i := range n {
			began := time.Now()
			body, err := get(ctx, srv.URL+"/metrics")
			if err != nil {
				return fig, err
			}
			fig.Scrape = append(fig.Scrape, time.Since(began))
			if i == 0 {
				fig.Bytes = len(body)
				for _, l := range strings.Split(body, "\n") {
					if strings.HasPrefix(l, "pgleader_") {
						fig.Series++
					}
				}
				if want := fmt.Sprintf(`pgleader_collector_up{database="%s"} 1`, f.Names[upTo-1]); !strings.Contains(body, want) {
					return fig, fmt.Errorf("the scrape over %d databases lacks %s", upTo, want)
				}
			}
			for _, c := range cols {
				if s := c.Snapshot(); s != nil {
					polls = append(polls, s.Health.PollDuration)
				}
			}
			select {
			case <-ctx.Done():
				return fig, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		fig.ScrapeP50, fig.ScrapeP99 = Quantile(fig.Scrape, .5), Quantile(fig.Scrape, .99)
		fig.PollP50, fig.PollP99 = Quantile(polls, .5), Quantile(polls, .99)
		fig.HeapMiB = float64(liveHeap()) / (1 << 20)
		fig.RSSMiB = float64(rss()) / (1 << 20)
		logf("exporter over %d database(s): scrape p50 %v p99 %v, %d series, heap %.1f MiB", upTo, fig.ScrapeP50, fig.ScrapeP99, fig.Series, fig.HeapMiB)
		return fig, nil
	}
	var err error
	if res.One, err = measure(1); err != nil {
		return res, fmt.Errorf("one database: %w", err)
	}
	if res.Fleet, err = measure(len(f.Configs)); err != nil {
		return res, fmt.Errorf("%d databases: %w", len(f.Configs), err)
	}
	return res, nil
}

// waitRead waits until every collector's snapshot holds scopes scopes.
func waitRead(ctx context.Context, cols []*collector.Collector, scopes int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ready := 0
		for _, c := range cols {
			if s := c.Snapshot(); s != nil && len(s.Scopes) == scopes && s.Health.Source != collector.SourceDisconnected {
				ready++
			}
		}
		if ready == len(cols) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d collectors read %d scopes within 2 minutes", ready, len(cols), scopes)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// liveHeap is the live heap after two collections (objects with a finalizer,
// such as closed files and connections, survive the first).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// rss is the process's resident set size in bytes (0 where /proc lacks it).
func rss() int64 {
	p, err := readProc(os.Getpid())
	if err != nil {
		return 0
	}
	return p.rssKiB << 10
}

// WriteTable prints the figures side by side, with the fleet's ratios to one
// database's.
func (r FleetScrapeResult) WriteTable(w io.Writer) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	ratio := func(a, b float64) string {
		if b <= 0 {
			return "—"
		}
		return fmt.Sprintf("×%.1f", a/b)
	}
	fmt.Fprintf(w, "exporter over a fleet: %d scopes and %d nodes per database (scrapes: n=%d each)\n", r.Scopes, r.Nodes, len(r.Fleet.Scrape))
	fmt.Fprintf(w, "  %-28s %14s %14s %8s\n", "", "1 database", fmt.Sprintf("%d databases", r.Fleet.Databases), "ratio")
	row := func(name, a, b, rt string) { fmt.Fprintf(w, "  %-28s %14s %14s %8s\n", name, a, b, rt) }
	row("scrape p50", ms(r.One.ScrapeP50), ms(r.Fleet.ScrapeP50), ratio(float64(r.Fleet.ScrapeP50), float64(r.One.ScrapeP50)))
	row("scrape p99 (target < 1 s)", ms(r.One.ScrapeP99), ms(r.Fleet.ScrapeP99), ratio(float64(r.Fleet.ScrapeP99), float64(r.One.ScrapeP99)))
	row("pgleader_* series", strconv.Itoa(r.One.Series), strconv.Itoa(r.Fleet.Series), ratio(float64(r.Fleet.Series), float64(r.One.Series)))
	row("page size", fmt.Sprintf("%d KiB", r.One.Bytes>>10), fmt.Sprintf("%d KiB", r.Fleet.Bytes>>10), ratio(float64(r.Fleet.Bytes), float64(r.One.Bytes)))
	row("collector full read p50", ms(r.One.PollP50), ms(r.Fleet.PollP50), ratio(float64(r.Fleet.PollP50), float64(r.One.PollP50)))
	row("collector full read p99", ms(r.One.PollP99), ms(r.Fleet.PollP99), ratio(float64(r.Fleet.PollP99), float64(r.One.PollP99)))
	row("live Go heap (after GC)", fmt.Sprintf("%.1f MiB", r.One.HeapMiB), fmt.Sprintf("%.1f MiB", r.Fleet.HeapMiB), ratio(r.Fleet.HeapMiB, r.One.HeapMiB))
	row("process RSS", fmt.Sprintf("%.0f MiB", r.One.RSSMiB), fmt.Sprintf("%.0f MiB", r.Fleet.RSSMiB), ratio(r.Fleet.RSSMiB, r.One.RSSMiB))
}
