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

// guardedStatName names the reference of a holder that keeps a second, idle
// session (Options.Split).
const guardedStatName = "limit, holder with an idle 2nd session"

const guardedWhat = "kill -9 of a holder process that also keeps an idle session (an advisory lock, LISTEN: a node's guard) → a bare follower's pg_advisory_lock returns"

// Hold takes pg_advisory_lock(key) on a connection of its own, prints HolderReady
// to w and holds the lock until ctx ends. It is the holder process of the physical
// limit (`pgleader bench holder`), meant to be killed. With idle > 0 it first
// opens that many more sessions, each holding an advisory lock of its own and
// LISTENing, and leaves them idle: the shape of a node's guard session, whose
// backend exits at the same kill.
func Hold(ctx context.Context, cfg *pgx.ConnConfig, key int64, idle int, w io.Writer) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for range idle {
		c, err := pgx.ConnectConfig(cctx, cfg)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(cctx, "SELECT pg_advisory_lock($1)", randomKey()); err != nil {
			return fmt.Errorf("take an idle session's lock: %w", err)
		}
		if _, err := c.Exec(cctx, "LISTEN pgleader_bench_holder"); err != nil {
			return fmt.Errorf("listen on an idle session: %w", err)
		}
	}
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
	bin     string
	dsn     string
	key     int64
	idle    int // idle sessions the holder keeps besides its lock's (Hold)
	timeout time.Duration
	lockWaiter
}

// lockWaiter is a bare follower: one connection that blocks in an advisory lock
// function, and one that watches pg_locks for its wait. It is kept across samples,
// with its statements prepared, so that no sample pays a parse round trip.
type lockWaiter struct {
	follower    *pgx.Conn
	followerPID uint32
	admin       *pgx.Conn // watches pg_locks for the follower's wait
	lock        string    // the statement that waits, e.g. SELECT pg_advisory_lock($1)
	unlock      string    // the statement that gives the lock back
	key         int64     // the key of the current wait
}

// randomKey is an advisory key no one else uses.
func randomKey() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]))
}

func newLimitProbe(ctx context.Context, bin, dsn string, timeout time.Duration) (*limitProbe, error) {
	p := &limitProbe{bin: bin, dsn: dsn, key: randomKey(), timeout: timeout}
	w, err := newLockWaiter(ctx, dsn, "pgleader bench limit", false, p.key)
	if err != nil {
		return nil, err
	}
	p.lockWaiter = *w
	return p, nil
}

// newLockWaiter connects a waiter (application_name app + " follower" / " watch")
// for an exclusive advisory lock, or a shared one, and prepares its statements on
// key (which it takes and gives back: key must be free).
func newLockWaiter(ctx context.Context, dsn, app string, shared bool, key int64) (*lockWaiter, error) {
	w := &lockWaiter{lock: "SELECT pg_advisory_lock($1)", unlock: "SELECT pg_advisory_unlock($1)"}
	if shared {
		w.lock, w.unlock = "SELECT pg_advisory_lock_shared($1)", "SELECT pg_advisory_unlock_shared($1)"
	}
	var err error
	if w.follower, err = connectAs(ctx, dsn, app+" follower"); err != nil {
		return nil, err
	}
	if w.admin, err = connectAs(ctx, dsn, app+" watch"); err != nil {
		w.close()
		return nil, err
	}
	w.followerPID = w.follower.PgConn().PID()
	for _, q := range []string{w.lock, w.unlock} {
		if _, err := w.follower.Exec(ctx, q, key); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

// grant is when a waiter's lock was granted (monotime), or why it was not.
type grant struct {
	at  int64
	err error
}

// wait starts the waiter's lock on key and returns once its backend waits for it;
// the channel delivers the grant. On an error the wait may still be pending: the
// caller frees the key and drains the channel.
func (w *lockWaiter) wait(ctx context.Context, key int64) (<-chan grant, error) {
	w.key = key
	granted := make(chan grant, 1)
	go func() {
		_, err := w.follower.Exec(ctx, w.lock, key)
		granted <- grant{monotime.Now(), err}
	}()
	return granted, w.awaitWaiting(ctx)
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

func (w *lockWaiter) close() {
	for _, c := range []*pgx.Conn{w.follower, w.admin} {
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

	granted, waitErr := p.wait(ctx, p.key)
	if waitErr != nil {
		_ = holder.Process.Kill()
		killed = true
		if g := <-granted; g.err != nil {
			return 0, errors.Join(waitErr, g.err)
		}
		_ = p.release(ctx)
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
	if err := p.release(ctx); err != nil {
		return 0, err
	}
	return ms(g.at - t0), nil
}

// startHolder runs `pgleader bench holder` and waits for its ready line.
func (p *limitProbe) startHolder(ctx context.Context) (*exec.Cmd, <-chan error, error) {
	cmd := exec.Command(p.bin, "bench", "holder", "--dsn", p.dsn, "--key", fmt.Sprint(p.key),
		"--idle-sessions", fmt.Sprint(p.idle))
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

// waitBeacon starts a wait on the beacon of node's live leadership session.
func (w *lockWaiter) waitBeacon(ctx context.Context, node string) (<-chan grant, error) {
	var key int64
	var held bool
	err := w.admin.QueryRow(ctx, `SELECT n.beacon_key, EXISTS (SELECT 1 FROM pg_locks l
		 WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ExclusiveLock' AND l.objsubid = 1
		   AND ((l.classid::bigint << 32) | l.objid::bigint) = n.beacon_key)
		  FROM pgleader.nodes n WHERE n.node_id = $1`, node).Scan(&key, &held)
	if err != nil {
		return nil, fmt.Errorf("the beacon of %s: %w", node, err)
	}
	if !held {
		return nil, fmt.Errorf("the beacon of %s (%d) is not held", node, key)
	}
	return w.wait(ctx, key)
}

// release gives back the key of the last wait once it was granted.
func (w *lockWaiter) release(ctx context.Context) error {
	_, err := w.follower.Exec(ctx, w.unlock, w.key)
	return err
}

// awaitWaiting returns once the follower's backend waits for an advisory lock.
func (w *lockWaiter) awaitWaiting(ctx context.Context) error {
	for {
		var waiting bool
		err := w.admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND pid = $1 AND NOT granted)`, int32(w.followerPID)).Scan(&waiting)
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
