// Package promtest runs a real Prometheus server for tests: it scrapes the
// given targets every second into a throwaway TSDB, and answers queries through
// its HTTP API, as Grafana and the rules would see the exporter's series.
//
// The prometheus binary must be on PATH. Without it a test is skipped, except
// under CI (the CI variable set), where a missing server must not pass
// silently.
package promtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/child"
)

// ScrapeInterval is how often the server scrapes every target.
const ScrapeInterval = time.Second

// Binary returns the path of the prometheus server, or skips t (fails it
// under CI) when it is not installed.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("prometheus not found in CI: %v", err)
		}
		t.Skip("prometheus not found; install it with: apt-get install -y prometheus (or download a Prometheus release)")
	}
	return path
}

// Server is a running Prometheus.
type Server struct {
	// URL is its base address, http://127.0.0.1:PORT.
	URL string
	// Started is when it was started: no sample is older.
	Started time.Time
}

// Start starts prometheus scraping targets (host:port, path /metrics) every
// ScrapeInterval under job "pgleader", waits until it is ready, and stops it
// when the test ends (its log goes to the test's log if the test failed).
func Start(t testing.TB, targets ...string) *Server {
	t.Helper()
	return StartWithRules(t, nil, targets...)
}

// StartWithRules is Start with rule files (paths) that the server evaluates
// every ScrapeInterval: its alerts are the ALERTS series (no Alertmanager).
func StartWithRules(t testing.TB, ruleFiles []string, targets ...string) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	rules := make([]string, len(ruleFiles))
	for i, f := range ruleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		rules[i] = strconv.Quote(abs)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
rule_files: [%[3]s]
scrape_configs:
  - job_name: pgleader
    static_configs:
      - targets: [%[2]s]
`, ScrapeInterval, strings.Join(quoted, ", "), strings.Join(rules, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	logs := &lockedBuilder{}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	// No orphan if the test binary dies; Pdeathsig is per thread (package child).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	waited, err := child.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- <-waited }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	s := &Server{URL: "http://" + addr, Started: time.Now()}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, logs.String())
		default:
		}
		if resp, err := http.Get(s.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30s:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Point is one value of a series at one time.
type Point struct {
	T time.Time
	V float64
}

// Series is one series of a result: its labels and its points (one for an
// instant vector; one per step, or per raw sample of a range vector, for a
// matrix). A step where the series has no value has no point.
type Series struct {
	Labels map[string]string
	Points []Point
}

// Values returns the series' values in order.
func (s Series) Values() []float64 {
	out := make([]float64, len(s.Points))
	for i, p := range s.Points {
		out[i] = p.V
	}
	return out
}

// Query evaluates expr at the instant at (/api/v1/query). A range-vector
// expression (metric[1m]) returns its raw samples.
func (s *Server) Query(expr string, at time.Time) ([]Series, error) {
	return s.get("/api/v1/query", url.Values{"query": {expr}, "time": {unix(at)}})
}

// QueryRange evaluates expr at every step from start to end
// (/api/v1/query_range), as a graph panel does.
func (s *Server) QueryRange(expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	return s.get("/api/v1/query_range", url.Values{"query": {expr}, "start": {unix(start)}, "end": {unix(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
}

// LabelValues returns the values of label among the series match selects:
// what Grafana's label_values(match, label) runs.
func (s *Server) LabelValues(label, match string) ([]string, error) {
	resp, err := http.Get(s.URL + "/api/v1/label/" + url.PathEscape(label) + "/values?" + url.Values{"match[]": {match}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string   `json:"status"`
		Error  string   `json:"error"`
		Data   []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("label values of %s: %w", label, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("label values of %s: %s", label, r.Error)
	}
	return r.Data, nil
}

func (s *Server) get(path string, v url.Values) ([]Series, error) {
	resp, err := http.Get(s.URL + path + "?" + v.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", path, err, body)
	}
	expr := v.Get("query")
	if r.Status != "success" {
		return nil, fmt.Errorf("%s %q: %s", path, expr, r.Error)
	}
	var result []struct {
		Metric map[string]string `json:"metric"`
		Value  []any             `json:"value"`
		Values [][]any           `json:"values"`
	}
	if err := json.Unmarshal(r.Data.Result, &result); err != nil {
		// A scalar or a string: one point without labels.
		var pt []any
		if err2 := json.Unmarshal(r.Data.Result, &pt); err2 != nil {
			return nil, fmt.Errorf("%s %q: %w", path, expr, err)
		}
		result = append(result, struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		}{Value: pt})
	}
	var out []Series
	for _, rs := range result {
		pts := rs.Values
		if rs.Value != nil {
			pts = [][]any{rs.Value}
		}
		sr := Series{Labels: rs.Metric}
		for _, pt := range pts {
			p, err := point(pt)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", path, expr, err)
			}
			sr.Points = append(sr.Points, p)
		}
		out = append(out, sr)
	}
	return out, nil
}

// point decodes [unix seconds, "value"].
func point(pt []any) (Point, error) {
	if len(pt) != 2 {
		return Point{}, fmt.Errorf("point %v: want [time, value]", pt)
	}
	ts, ok := pt[0].(float64)
	str, ok2 := pt[1].(string)
	if !ok || !ok2 {
		return Point{}, fmt.Errorf("point %v: want [number, string]", pt)
	}
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return Point{}, fmt.Errorf("point %v: %w", pt, err)
	}
	sec, frac := math.Modf(ts)
	return Point{T: time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)), V: v}, nil
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', 3, 64) }

// freePort returns a port nothing listens on now (prometheus binds it a
// moment later).
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// lockedBuilder is the server's log: written by the exec package's copying
// goroutine, read by the test.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
