package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/internal/monotime"
	"github.com/pgleader/pgleader/lab/child"
)

// The physical limit of crash failover is what PostgreSQL itself allows: a bare
// follower blocked in pg_advisory_lock(k) on its own connection while a holder
// process holds k on its session; the holder is SIGKILLed, and the figure is the time
// from the kill being sent to the follower's pg_advisory_lock returning. It is
// measured in the same run and on the same server as pgleader's figures, so a ratio
// to it carries across machines and days where absolute times drift.

// limitStatName names the physical limit's Stat.
const limitStatName = "physical limit"

const limitWhat = "kill -9 of a holder process → a bare follower's pg_advisory_lock returns"

// HolderReady is the line a holder process prints once it holds the lock.
const HolderReady = "ready"

// Hold takes pg_advisory_lock(key) on a connection of its own, prints HolderReady
// to w and holds the lock until ctx ends. It is the holder process of the physical
// limit (`pgleader bench holder`), meant to be killed.
func Hold(ctx context.Context, cfg *pgx.ConnConfig, key int64, w io.Writer) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(cctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return fmt.Errorf("take the lock: %w", err)
	}
	if _, err := fmt.Fprintln(w, HolderReady); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// limitProbe takes physical-limit samples: one follower connection kept across
// samples, a fresh holder process per sample.
type limitProbe struct {
	bin         string
	dsn         string
	key         int64
	follower    *pgx.Conn
	followerPID uint32
	admin       *pgx.Conn // watches pg_locks for the follower's wait
	timeout     time.Duration
}

func newLimitProbe(ctx context.Context, bin, dsn string, timeout time.Duration) (*limitProbe, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	p := &limitProbe{bin: bin, dsn: dsn, key: int64(binary.BigEndian.Uint64(b[:])), timeout: timeout}
	var err error
	if p.follower, err = connectAs(ctx, dsn, "pgleader bench limit follower"); err != nil {
		return nil, err
	}
	if p.admin, err = connectAs(ctx, dsn, "pgleader bench limit watch"); err != nil {
		p.close()
		return nil, err
	}
	p.followerPID = p.follower.PgConn().PID()
	// Prepare both statements now, so no sample pays a parse round trip.
	for _, q := range []string{"SELECT pg_advisory_lock($1)", "SELECT pg_advisory_unlock($1)"} {
		if _, err := p.follower.Exec(ctx, q, p.key); err != nil {
			p.close()
			return nil, err
		}
	}
	return p, nil
}

func connectAs(ctx context.Context, dsn, app string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = app
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pgx.ConnectConfig(cctx, cfg)
}

func (p *limitProbe) close() {
	for _, c := range []*pgx.Conn{p.follower, p.admin} {
		if c != nil {
			c.Close(context.Background())
		}
	}
}

// sample measures one kill: holder process up and holding, follower waiting,
// SIGKILL → the follower's lock returns. It returns milliseconds.
func (p *limitProbe) sample(ctx context.Context) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	holder, waited, err := p.startHolder(ctx)
	if err != nil {
		return 0, err
	}
	killed := false
	defer func() {
		if !killed {
			_ = holder.Process.Kill()
		}
		<-waited
	}()

	type grant struct {
		at  int64
		err error
	}
	granted := make(chan grant, 1)
	go func() {
		_, err := p.follower.Exec(ctx, "SELECT pg_advisory_lock($1)", p.key)
		granted <- grant{monotime.Now(), err}
	}()
	waitErr := p.awaitWaiting(ctx)
	if waitErr != nil {
		_ = holder.Process.Kill()
		killed = true
		if g := <-granted; g.err != nil {
			return 0, errors.Join(waitErr, g.err)
		}
		_, _ = p.follower.Exec(ctx, "SELECT pg_advisory_unlock($1)", p.key)
		return 0, waitErr
	}
	t0 := monotime.Now()
	err = holder.Process.Signal(syscall.SIGKILL)
	killed = true
	if err != nil {
		return 0, fmt.Errorf("kill the holder: %w", err)
	}
	g := <-granted
	if g.err != nil {
		return 0, fmt.Errorf("follower's pg_advisory_lock: %w", g.err)
	}
	if _, err := p.follower.Exec(ctx, "SELECT pg_advisory_unlock($1)", p.key); err != nil {
		return 0, err
	}
	return ms(g.at - t0), nil
}

// startHolder runs `pgleader bench holder` and waits for its ready line.
func (p *limitProbe) startHolder(ctx context.Context) (*exec.Cmd, <-chan error, error) {
	cmd := exec.Command(p.bin, "bench", "holder", "--dsn", p.dsn, "--key", fmt.Sprint(p.key))
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	waited, err := child.Start(cmd) // Pdeathsig is per thread: see package child
	if err != nil {
		return nil, nil, fmt.Errorf("start the holder: %w", err)
	}
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- strings.TrimSpace(line) == HolderReady
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-ready:
		if ok {
			return cmd, waited, nil
		}
	case <-ctx.Done():
	}
	_ = cmd.Process.Kill()
	<-waited
	return nil, nil, fmt.Errorf("holder process never held the lock: %s", strings.TrimSpace(stderr.String()))
}

// awaitWaiting returns once the follower's backend waits for the key.
func (p *limitProbe) awaitWaiting(ctx context.Context) error {
	for {
		var waiting bool
		err := p.admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND pid = $1 AND NOT granted)`, int32(p.followerPID)).Scan(&waiting)
		if err != nil {
			return fmt.Errorf("waiting for the follower to block: %w", err)
		}
		if waiting {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("follower never blocked: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// limitSamples takes n samples with a fresh probe, reporting each on progress.
func limitSamples(ctx context.Context, bin, dsn string, n int, timeout time.Duration, progress io.Writer) ([]float64, error) {
	p, err := newLimitProbe(ctx, bin, dsn, timeout)
	if err != nil {
		return nil, err
	}
	defer p.close()
	var out []float64
	for i := range n {
		x, err := p.sample(ctx)
		if err != nil {
			return out, fmt.Errorf("limit sample %d: %w", i+1, err)
		}
		out = append(out, x)
		fmt.Fprintf(progress, "limit %d/%d: holder killed → follower granted after %.2f ms\n", i+1, n, x)
	}
	return out, nil
}

// VsLimit sets a figure beside the physical limit of the same run.
type VsLimit struct {
	LimitP50MS float64 `json:"limit_p50_ms"`
	LimitP99MS float64 `json:"limit_p99_ms"`
	P50Ratio   float64 `json:"p50_ratio"` // figure's median / limit's median
	P99Ratio   float64 `json:"p99_ratio"` // figure's p99 / limit's p99
}

// vsLimit compares s with the limit (nil without limit samples).
func vsLimit(s Stat, limit *Stat) *VsLimit {
	if limit == nil || limit.N == 0 || s.N == 0 || limit.MedianMS <= 0 || limit.P99MS <= 0 {
		return nil
	}
	return &VsLimit{LimitP50MS: limit.MedianMS, LimitP99MS: limit.P99MS,
		P50Ratio: s.MedianMS / limit.MedianMS, P99Ratio: s.P99MS / limit.P99MS}
}

// Target is a ratio target checked against the same run's physical limit. A miss
// is reported, never an error: figures on a shared machine vary.
type Target struct {
	Name    string  `json:"name"`
	Stat    string  `json:"stat"`
	Ratio   float64 `json:"ratio"` // the figure: a ratio to the limit, or Value in Unit
	Value   float64 `json:"value,omitempty"`
	Unit    string  `json:"unit,omitempty"` // Value's unit ("ms", "wins"); "" for a ratio
	Max     float64 `json:"max,omitempty"`
	Min     float64 `json:"min,omitempty"` // a floor instead of a ceiling (Max 0)
	Met     bool    `json:"met"`
	Verdict string  `json:"verdict"` // PASS or MISS
	Note    string  `json:"note,omitempty"`
}

func verdict(met bool) string {
	if met {
		return "PASS"
	}
	return "MISS"
}
