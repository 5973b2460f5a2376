package bench

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DashboardResult is what DashboardLatency measured.
type DashboardResult struct {
	// CommitToScreen[i] is the time from the moment the i-th leadership change's
	// commit returned to the client until the terminal showed the new leader in
	// the scope's row: `pgleader top` in a real terminal (tmux), read back with
	// capture-pane every PollEvery. It includes the collector (NOTIFY → read),
	// the dashboard's render and the terminal, plus up to PollEvery of sampling.
	CommitToScreen []time.Duration
	PollEvery      time.Duration
	Width, Height  int
}

// DashboardLatency runs `bin top` against dsn (a migrated database) in a detached
// tmux session of 120×40 and changes the leader of one scope n times by SQL,
// timing each change from commit to screen. It needs tmux.
func DashboardLatency(ctx context.Context, bin, dsn string, n int, logf func(string, ...any)) (DashboardResult, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		return DashboardResult{}, fmt.Errorf("the dashboard benchmark needs tmux (apt-get install -y tmux)")
	}
	res := DashboardResult{PollEvery: 2 * time.Millisecond, Width: 120, Height: 40}
	session := fmt.Sprintf("pgleader-bench-%d", time.Now().UnixNano())
	if out, err := exec.CommandContext(ctx, "tmux", "new-session", "-d", "-s", session,
		"-x", fmt.Sprint(res.Width), "-y", fmt.Sprint(res.Height),
		fmt.Sprintf("%s top --interval 1s --no-color --dsn '%s'", bin, dsn)).CombinedOutput(); err != nil {
		return res, fmt.Errorf("tmux: %v: %s", err, out)
	}
	defer exec.Command("tmux", "kill-session", "-t", session).Run()
	capture := func() (string, error) {
		out, err := exec.Command("tmux", "capture-pane", "-p", "-t", session).Output()
		return string(out), err
	}
	// The dashboard is up once its header is drawn.
	if err := waitScreen(ctx, capture, 20*time.Second, func(s string) bool { return strings.Contains(s, "SCOPES") }); err != nil {
		return res, fmt.Errorf("dashboard did not start: %w", err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.Background())
	const scope = "bench-screen"
	for i := range n {
		node := fmt.Sprintf("screen-%03d", i+1)
		row := regexp.MustCompile(`(?m)^\S?\s*` + scope + `\s.*\s` + node + `\s`)
		// A claim is made only by the session that registered its node.
		if _, err := conn.Exec(ctx, `SELECT pgleader.register_node($1, 'bench', 1, 'bench', ARRAY[$2::text], 500, 1500, 2000, 0, 0)`,
			node, scope); err != nil {
			return res, fmt.Errorf("register %s: %w", node, err)
		}
		var acquired bool
		var epoch int64
		err := conn.QueryRow(ctx, claimSQL,
			scope, node).Scan(&acquired, &epoch)
		committed := time.Now()
		if err != nil || !acquired {
			return res, fmt.Errorf("claim %d: acquired %v, %v", i+1, acquired, err)
		}
		if err := waitScreen(ctx, capture, 10*time.Second, row.MatchString); err != nil {
			return res, fmt.Errorf("change %d never reached the screen: %w", i+1, err)
		}
		res.CommitToScreen = append(res.CommitToScreen, time.Since(committed))
		logf("dashboard %d/%d: %s epoch %d on screen after %.1f ms", i+1, n, node, epoch, ms(res.CommitToScreen[i].Nanoseconds()))
		if _, err := conn.Exec(ctx, releaseSQL, scope, epoch, node); err != nil {
			return res, fmt.Errorf("release %d: %w", i+1, err)
		}
		// Spread the changes so each meets a settled dashboard (and a random
		// phase of its poll and frame clocks).
		time.Sleep(time.Duration(150+37*(i%7)) * time.Millisecond)
	}
	return res, nil
}

// waitScreen samples the terminal every 2ms until ok or d passes.
func waitScreen(ctx context.Context, capture func() (string, error), d time.Duration, ok func(string) bool) error {
	deadline := time.Now().Add(d)
	for {
		s, err := capture()
		if err == nil && ok(s) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("screen after %v:\n%s", d, s)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Quantile returns the nearest-rank q-quantile (0 < q ≤ 1) of ds.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(len(s)-1, i))]
}

// DemoResult is what DemoTiming measured.
type DemoResult struct {
	// ToLeaders[i]: from launching `pgleader demo` until the dashboard shows every
	// scope OK (a throwaway PostgreSQL started, nodes elected). ToShell[i]: from
	// pressing q until the shell runs the next command.
	ToLeaders, ToShell []time.Duration
	// Leftovers lists node processes or scratch directories found after an exit
	// (none expected).
	Leftovers []string
}

// DemoTiming runs `bin demo` n times in a tmux session (120×40) and times start
// and quit. It needs tmux; it uses its own throwaway PostgreSQL each time.
func DemoTiming(ctx context.Context, bin string, n int, logf func(string, ...any)) (DemoResult, error) {
	var res DemoResult
	if _, err := exec.LookPath("tmux"); err != nil {
		return res, fmt.Errorf("the demo benchmark needs tmux (apt-get install -y tmux)")
	}
	for i := range n {
		session := fmt.Sprintf("pgleader-bench-demo-%d", time.Now().UnixNano())
		start := time.Now()
		if out, err := exec.CommandContext(ctx, "tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
			bin+" demo --listen off; echo DEMO-EXITED-$?; sleep 30").CombinedOutput(); err != nil {
			return res, fmt.Errorf("tmux: %v: %s", err, out)
		}
		capture := func() (string, error) {
			out, err := exec.Command("tmux", "capture-pane", "-p", "-t", session).Output()
			return string(out), err
		}
		ok := regexp.MustCompile(`✔ OK billing\s+✔ OK reports`)
		err := waitScreen(ctx, capture, 30*time.Second, ok.MatchString)
		if err == nil {
			res.ToLeaders = append(res.ToLeaders, time.Since(start))
			time.Sleep(time.Second)
			quit := time.Now()
			err = exec.Command("tmux", "send-keys", "-t", session, "q").Run()
			if err == nil {
				err = waitScreen(ctx, capture, 10*time.Second, func(s string) bool { return strings.Contains(s, "DEMO-EXITED-") })
			}
			res.ToShell = append(res.ToShell, time.Since(quit))
			if s, _ := capture(); err == nil && !strings.Contains(s, "DEMO-EXITED-0") {
				err = fmt.Errorf("demo exited non-zero:\n%s", s)
			}
		}
		_ = exec.Command("tmux", "kill-session", "-t", session).Run()
		if err != nil {
			return res, err
		}
		if out, _ := exec.Command("pgrep", "-f", bin+" node").Output(); len(strings.TrimSpace(string(out))) > 0 {
			res.Leftovers = append(res.Leftovers, "node processes: "+strings.Join(strings.Fields(string(out)), ","))
		}
		logf("demo %d/%d: leaders on screen after %v, shell back %v after q", i+1, n, res.ToLeaders[i], res.ToShell[i])
	}
	return res, nil
}
