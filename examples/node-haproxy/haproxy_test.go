// Package nodehaproxy tests the node-haproxy example: three replicas of a
// Node.js submission manager, each executor under `pgleader run --listen`, and
// Debian's HAProxy in front checking each replica's pgleader API, as real
// processes against a real PostgreSQL.
package nodehaproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/examples/internal/pgrun"
	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const scope = "submissions" // haproxy.cfg's check path names it

type replica struct {
	name       string
	front, api string // HOST:PORT of its front and of its pgleader run's API
	frontProc  *pgrun.Proc
	run        *pgrun.Proc
}

// install copies the example into a temporary directory and installs its npm
// dependencies there (npm ci: the versions of package-lock.json), leaving the
// source tree as it was.
func install(t *testing.T, npm string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"replica.js", "package.json", "package-lock.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	return dir
}

// checkTiming reads inter, fall and rise from haproxy.cfg's default-server line:
// the bound below is derived from the configuration the test runs.
func checkTiming(t *testing.T) (inter time.Duration, fall, rise int) {
	t.Helper()
	cfg, err := os.ReadFile("haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*default-server inter (\d+)ms fall (\d+) rise (\d+)`).FindSubmatch(cfg)
	if m == nil {
		t.Fatal("haproxy.cfg: no 'default-server inter Nms fall N rise N' line")
	}
	ms, _ := strconv.Atoi(string(m[1]))
	fall, _ = strconv.Atoi(string(m[2]))
	rise, _ = strconv.Atoi(string(m[3]))
	return time.Duration(ms) * time.Millisecond, fall, rise
}

// example is the example running: three replicas, each a front and an
// executor under pgleader run --listen, and HAProxy in front.
type example struct {
	t          *testing.T
	db         *pgx.Conn
	bind       string // HAProxy's front end
	rs         []*replica
	client     *http.Client
	inter      time.Duration // haproxy.cfg's check timing
	fall, rise int
}

// answer is what GET /whoami says through HAProxy: the replica that
// answered, and what its front learnt from its own pgleader API.
type answer struct {
	Replica string
	Leading bool
	Epoch   int64
}

// start runs the README's three replicas against a throwaway PostgreSQL, and
// HAProxy with haproxy.cfg in front.
func start(t *testing.T) *example {
	t.Helper()
	bins := pgrun.Need(t, "install Node.js with npm and Debian's haproxy (.ci/install-deps)", "node", "npm", "haproxy")
	node, npm, haproxy := bins[0], bins[1], bins[2]
	dsn := pgtest.MigratedDSN(t)
	pgleader := pgrun.Build(t)
	app := install(t, npm)
	x := &example{t: t, bind: "127.0.0.1:" + strconv.Itoa(pgrun.FreePort(t)),
		// One connection per request: HAProxy balances each on its own.
		client: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	x.inter, x.fall, x.rise = checkTiming(t)
	ctx := context.Background()
	var err error
	if x.db, err = pgx.Connect(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.db.Close(ctx) })
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.db.Exec(ctx, string(schema)); err != nil {
		t.Fatal(err)
	}
	hapEnv := []string{"BIND=" + x.bind}
	for i := 1; i <= 3; i++ {
		r := &replica{name: fmt.Sprintf("r%d", i),
			front: "127.0.0.1:" + strconv.Itoa(pgrun.FreePort(t)), api: "127.0.0.1:" + strconv.Itoa(pgrun.FreePort(t))}
		r.frontProc = pgrun.Start(t, r.name+"-front", []string{"DATABASE_URL=" + dsn, "REPLICA=" + r.name, "LISTEN=" + r.front,
			"PGLEADER_API=" + r.api, "SCOPE=" + scope}, node, filepath.Join(app, "replica.js"), "front")
		args := append([]string{pgleader, "run", "--id", r.name, "--scope", scope, "--listen", r.api}, pgrun.Fast...)
		r.run = pgrun.Start(t, r.name+"-run", []string{"DATABASE_URL=" + dsn},
			append(args, "--", node, filepath.Join(app, "replica.js"), "execute")...)
		_, apiPort, _ := strings.Cut(r.api, ":")
		hapEnv = append(hapEnv, fmt.Sprintf("R%d_FRONT=%s", i, r.front), fmt.Sprintf("R%d_API_PORT=%s", i, apiPort))
		x.rs = append(x.rs, r)
	}
	cfg, err := filepath.Abs("haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	pgrun.Start(t, "haproxy", hapEnv, haproxy, "-db", "-f", cfg)
	return x
}

func (x *example) count(sql string, args ...any) int {
	x.t.Helper()
	var n int
	if err := x.db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		x.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// leader returns the replica whose pgleader run leads with its executor running.
func (x *example) leader() (*replica, pgrun.Leader) {
	for _, r := range x.rs {
		if l, err := pgrun.Ask(r.api, scope); err == nil && l.Leading && l.Supervisor.State == "running" {
			return r, l
		}
	}
	return nil, pgrun.Leader{}
}

// ask asks GET /whoami through HAProxy.
func (x *example) ask() answer {
	resp, err := x.client.Get("http://" + x.bind + "/whoami")
	if err != nil {
		return answer{Replica: "error: " + err.Error()}
	}
	defer resp.Body.Close()
	var a answer
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&a) != nil {
		return answer{Replica: "status: " + resp.Status} // 503: HAProxy has no server up
	}
	return a
}

func (x *example) whoami() string { return x.ask().Replica }

// settle waits for a leader whose executor runs, and for HAProxy to route 20
// requests in a row to it.
func (x *example) settle() (*replica, pgrun.Leader) {
	x.t.Helper()
	var first *replica
	var l1 pgrun.Leader
	pgtest.WaitFor(x.t, "a leader whose executor runs", 30*time.Second, func() bool { first, l1 = x.leader(); return first != nil })
	streak := 0
	pgtest.WaitFor(x.t, "HAProxy to route 20 requests in a row to the leader "+first.name, 20*time.Second, func() bool {
		if x.whoami() == first.name {
			streak++
		} else {
			streak = 0
		}
		return streak >= 20
	})
	if a := x.ask(); a.Replica != first.name || !a.Leading || a.Epoch != l1.Epoch {
		x.t.Fatalf("through HAProxy: %+v; want %s, leading under epoch %d", a, first.name, l1.Epoch)
	}
	return first, l1
}

// TestHAProxyFollowsTheLeader sends requests through HAProxy to the leader's
// replica while submissions arrive on every replica, kills the leader's pgleader
// run with SIGKILL, and measures (a) when the successor's executor first
// executes and (b) when HAProxy routes every request to the successor; it
// asserts (b) within lease + inter×fall + inter×rise + 1 s, and that every
// submission was executed exactly once.
func TestHAProxyFollowsTheLeader(t *testing.T) {
	pgtest.Slow(t)
	x := start(t)
	ctx := context.Background()
	first, l1 := x.settle()

	// Submissions arrive on every replica's front, round robin, all along.
	stopSubmit := make(chan struct{})
	var submitWG sync.WaitGroup
	var submitMu sync.Mutex
	var accepted int
	var submitErrs []string
	submitWG.Add(1)
	go func() {
		defer submitWG.Done()
		for i := 0; ; i++ {
			select {
			case <-stopSubmit:
				return
			case <-time.After(5 * time.Millisecond):
			}
			r := x.rs[i%len(x.rs)]
			resp, err := x.client.Post("http://"+r.front+"/submit", "text/plain", strings.NewReader(fmt.Sprintf("job %d", i)))
			submitMu.Lock()
			if err != nil {
				submitErrs = append(submitErrs, err.Error())
			} else {
				if resp.StatusCode == http.StatusOK {
					accepted++
				} else {
					submitErrs = append(submitErrs, r.name+": "+resp.Status)
				}
				resp.Body.Close()
			}
			submitMu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-stopSubmit:
		default:
			close(stopSubmit)
		}
		submitWG.Wait()
	}()
	pgtest.WaitFor(t, "the first leader's executions", 20*time.Second, func() bool {
		return x.count("SELECT count(*) FROM executions WHERE epoch = $1", l1.Epoch) >= 20
	})

	// kill -9 the leader's pgleader run (its guard kills its executor; its
	// front stays up, as on a host whose supervisor crashed).
	killed := time.Now() // figures count from the signal
	first.run.Kill9(t)

	// Probe through HAProxy until the successor has answered every request for
	// a second in a row; (b) is the first answer of that streak.
	type probe struct {
		at  time.Duration
		got string
	}
	var probes []probe
	var next *replica
	var l2 pgrun.Leader
	var streakFrom time.Duration = -1
	deadline := time.Now().Add(20 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy did not settle on a new leader within 20s of the kill; last probes: %v", probes[max(0, len(probes)-10):])
		}
		if next == nil {
			if r, l := x.leader(); r != nil && r != first {
				next, l2 = r, l
			}
		}
		p := probe{got: x.whoami(), at: time.Since(killed)}
		probes = append(probes, p)
		if next != nil && p.got == next.name {
			if streakFrom < 0 {
				streakFrom = p.at
			}
			if p.at-streakFrom >= time.Second {
				break
			}
		} else {
			streakFrom = -1
		}
		time.Sleep(5 * time.Millisecond) // probe pacing, not synchronisation
	}
	routed := streakFrom
	if l2.Epoch <= l1.Epoch {
		t.Fatalf("successor %s leads with epoch %d, not above the killed leader's %d", next.name, l2.Epoch, l1.Epoch)
	}
	answered := map[string]int{} // by replica; "none": HAProxy had no server up, or an error
	for _, p := range probes {
		if strings.HasPrefix(p.got, "r") {
			answered[p.got]++
		} else {
			answered["none"]++
		}
	}

	// Stop submitting, and wait until the successor has executed everything.
	close(stopSubmit)
	submitWG.Wait()
	pgtest.WaitFor(t, "every submission executed", 20*time.Second, func() bool {
		return x.count("SELECT count(*) FROM submissions WHERE done_at IS NULL") == 0
	})

	var elected, executed time.Time
	if err := x.db.QueryRow(ctx, "SELECT acquired_at FROM pgleader.terms WHERE scope = $1 AND epoch = $2", scope, l2.Epoch).Scan(&elected); err != nil {
		t.Fatal(err)
	}
	if err := x.db.QueryRow(ctx, "SELECT min(at) FROM executions WHERE epoch = $1", l2.Epoch).Scan(&executed); err != nil {
		t.Fatal(err)
	}
	bound := pgrun.SessionLease + time.Duration(x.fall)*x.inter + time.Duration(x.rise)*x.inter + time.Second
	t.Logf("HAProxy inter %v fall %d rise %d; pgleader run %v", x.inter, x.fall, x.rise, strings.Join(pgrun.Fast, " "))
	t.Logf("kill -9 of %s's pgleader run (epoch %d) → %s elected (epoch %d): %v (database clock)",
		first.name, l1.Epoch, next.name, l2.Epoch, elected.Sub(killed).Round(100*time.Microsecond))
	t.Logf("(a) successor's first execution: %v after the kill (database clock)", executed.Sub(killed).Round(100*time.Microsecond))
	t.Logf("(b) HAProxy routes every request to %s: %v after the kill (bound %v = lease %v + inter×fall %v + inter×rise %v + 1s); %d probes from the kill, answered by %v",
		next.name, routed.Round(time.Millisecond), bound, pgrun.SessionLease, time.Duration(x.fall)*x.inter, time.Duration(x.rise)*x.inter, len(probes), answered)
	if routed > bound {
		t.Errorf("HAProxy routed to the new leader %v after the kill, beyond the bound %v", routed, bound)
	}

	// Exactly once: every accepted submission stored and executed once, by the
	// term that marked it done; both terms executed.
	submitMu.Lock()
	if len(submitErrs) > 0 {
		t.Errorf("%d submissions refused, first: %s", len(submitErrs), submitErrs[0])
	}
	stored := accepted
	submitMu.Unlock()
	if n := x.count("SELECT count(*) FROM submissions"); n != stored {
		t.Errorf("%d submissions stored, %d accepted", n, stored)
	}
	if n := x.count("SELECT count(*) FROM executions"); n != stored {
		t.Errorf("%d executions for %d submissions, want exactly one each", n, stored)
	}
	if n := x.count("SELECT count(*) FROM (SELECT submission_id FROM executions GROUP BY submission_id HAVING count(*) > 1) x"); n != 0 {
		t.Errorf("%d submissions executed more than once", n)
	}
	if n := x.count(`SELECT count(*) FROM submissions s JOIN executions x ON x.submission_id = s.id
	               WHERE x.epoch <> s.done_epoch OR x.node <> s.done_by`); n != 0 {
		t.Errorf("%d executions disagree with the epoch or node that marked their submission done", n)
	}
	if n := x.count("SELECT count(DISTINCT accepted_by) FROM submissions"); n != 3 {
		t.Errorf("submissions accepted by %d replicas, want all 3", n)
	}
	if n := x.count("SELECT count(*) FROM executions WHERE epoch = $1 AND at >= $2", l1.Epoch, executed); n != 0 {
		t.Errorf("%d executions under the killed leader's epoch %d after its successor's first", n, l1.Epoch)
	}
	if n := x.count("SELECT count(*) FROM executions WHERE epoch = $1", l2.Epoch); n == 0 {
		t.Errorf("the successor executed nothing")
	}
}
