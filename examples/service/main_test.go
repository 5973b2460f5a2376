package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgleader/pgleader/examples/internal/replica"
	"github.com/pgleader/pgleader/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestHandover runs the service as two replicas, the way the README describes
// it: kill -9 of the leader hands the work to the other; SIGTERM of a leader
// exits 0 after handing over; every epoch's writes come from one process.
func TestHandover(t *testing.T) {
	pgtest.Slow(t)
	dsn := pgtest.MigratedDSN(t)
	bin := replica.Build(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	runs := func(where string, args ...any) int {
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM invoice_runs "+where, args...).Scan(&n); err != nil {
			return 0 // the table appears with the first replica
		}
		return n
	}

	a, b := replica.Start(t, bin, dsn), replica.Start(t, bin, dsn)
	pgtest.WaitFor(t, "a leader", 30*time.Second, func() bool { return replica.Leader(a, b) != nil })
	first := replica.Leader(a, b)
	other := map[*replica.Replica]*replica.Replica{a: b, b: a}[first]
	pgtest.WaitFor(t, "the leader's first runs", 30*time.Second, func() bool { return runs("WHERE pid = $1", first.Cmd.Process.Pid) >= 2 })

	// kill -9: the other replica takes over and runs the job.
	if err := first.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done
	pgtest.WaitFor(t, "the survivor to lead and run", 30*time.Second, func() bool {
		return other.Role() == "leader" && runs("WHERE pid = $1", other.Cmd.Process.Pid) >= 2
	})

	// A new replica joins as a follower; SIGTERM to the leader hands over and exits 0.
	c := replica.Start(t, bin, dsn)
	pgtest.WaitFor(t, "the new replica to follow", 30*time.Second, func() bool { return c.Role() == "follower" })
	if err := other.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-other.Done:
		if other.Err != nil {
			t.Fatalf("the leader exited with %v after SIGTERM, want 0", other.Err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not exit within 30s of SIGTERM")
	}
	pgtest.WaitFor(t, "the follower to take over and run", 30*time.Second, func() bool {
		return runs("WHERE pid = $1", c.Cmd.Process.Pid) >= 2
	})

	// Every epoch's writes come from one process, and three processes led.
	rows, err := conn.Query(context.Background(),
		"SELECT epoch, count(DISTINCT pid), min(pid) FROM invoice_runs GROUP BY epoch ORDER BY epoch")
	if err != nil {
		t.Fatal(err)
	}
	var epochs []string
	leaders := map[int]bool{}
	for rows.Next() {
		var epoch int64
		var pids, pid int
		if err := rows.Scan(&epoch, &pids, &pid); err != nil {
			t.Fatal(err)
		}
		if pids != 1 {
			t.Errorf("epoch %d was written by %d processes", epoch, pids)
		}
		leaders[pid] = true
		epochs = append(epochs, fmt.Sprint(epoch))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(leaders) != 3 {
		t.Errorf("%d processes wrote (epochs %v), want 3: first leader, survivor, successor", len(leaders), epochs)
	}
}
