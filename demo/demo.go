// Package demo runs a local pgleader cluster to watch: a throwaway PostgreSQL, a few
// `pgleader node` processes doing fenced writes, and a live log of leadership
// changes. Nodes that die are restarted after a pause, so a kill from another
// terminal shows both the failover and the healing.
//
// This is the first cut of the demo; the on-call dashboard and fault keys build on
// it.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pgleader/pgleader/internal/cluster"
	"github.com/pgleader/pgleader/internal/eventlog"
)

// Options configure a demo.
type Options struct {
	Bin      string        // pgleader binary for the nodes
	DSN      string        // empty: a throwaway PostgreSQL
	Nodes    int           // node processes
	Scopes   []string      // scopes every node campaigns for
	Work     time.Duration // fenced write interval of a leader
	Restart  time.Duration // delay before a dead node is started again
	Duration time.Duration // 0: until ctx ends
	Out      io.Writer
}

// Run runs the demo until ctx ends or Duration passes.
func Run(ctx context.Context, o Options) error {
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	out := o.Out
	if o.DSN == "" {
		fmt.Fprintln(out, "starting a throwaway PostgreSQL …")
	}
	dsn, _, closeDB, err := cluster.Database(ctx, o.DSN, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	dir, err := os.MkdirTemp("", "pgleader-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c := cluster.New(cluster.Options{Bin: o.Bin, DSN: dsn, Dir: dir, Scopes: o.Scopes,
		NodeArgs: []string{"--work-interval", o.Work.String(), "--log-level", "warn"}})
	defer c.Close()
	ids := make([]string, o.Nodes)
	for i := range ids {
		ids[i] = fmt.Sprintf("node-%d", i+1)
		if _, err := c.Start(ids[i]); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "database: %s\nnode logs and event files: %s\n", dsn, dir)
	for _, id := range ids {
		fmt.Fprintf(out, "  %s  pid %d\n", id, c.Node(id).PID())
	}
	fmt.Fprintf(out, "\nbreak it from another terminal (kill -9 <pid>, kill -STOP <pid> … kill -CONT <pid>),\n"+
		"or from psql: SELECT pg_terminate_backend(holder_pid) FROM pgleader.leader_state;\n"+
		"dead nodes come back after %v. Ctrl-C stops the demo.\n\n", o.Restart)

	dead := map[string]time.Time{}
	oks := map[string]int{}
	status := time.NewTicker(5 * time.Second)
	defer status.Stop()
	for {
		fresh, err := c.Poll()
		if err != nil {
			return err
		}
		for _, r := range fresh {
			if line := describe(r); line != "" {
				fmt.Fprintf(out, "%s  %s\n", time.Now().Format("15:04:05.000"), line)
			}
			if r.Event == "action_ok" {
				oks[r.Scope]++
			}
			if r.Event == cluster.ProcessExit {
				dead[r.Node] = time.Now()
			}
		}
		for id, at := range dead {
			if time.Since(at) >= o.Restart {
				if n, err := c.Start(id); err == nil {
					fmt.Fprintf(out, "%s  %s restarted (pid %d)\n", time.Now().Format("15:04:05.000"), id, n.PID())
				}
				delete(dead, id)
			}
		}
		printStatus := func() {
			for _, s := range o.Scopes {
				leader, epoch := c.Leader(s)
				if leader == "" {
					leader = "(none)"
				}
				fmt.Fprintf(out, "%s  status %s: leader %s, epoch %d, %d fenced writes acknowledged\n",
					time.Now().Format("15:04:05.000"), s, leader, epoch, oks[s])
			}
		}
		select {
		case <-ctx.Done():
			printStatus()
			fmt.Fprintln(out, "stopping …")
			return nil
		case <-status.C:
			printStatus()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// describe turns a record worth showing into a line.
func describe(r eventlog.Record) string {
	switch r.Event {
	case "gate_open":
		return fmt.Sprintf("%s leads %s (epoch %d)", r.Node, r.Scope, r.Epoch)
	case "gate_closed":
		return fmt.Sprintf("%s closed its gate for %s (epoch %d): %s", r.Node, r.Scope, r.Epoch, r.Reason)
	case "lost":
		return fmt.Sprintf("%s lost %s (epoch %d): %s", r.Node, r.Scope, r.Epoch, r.Reason)
	case "resigned":
		return fmt.Sprintf("%s handed %s over (epoch %d): %s", r.Node, r.Scope, r.Epoch, r.Reason)
	case "action_rejected":
		return fmt.Sprintf("%s: a write under stale epoch %d was refused by the database", r.Node, r.Epoch)
	case cluster.ProcessExit:
		return fmt.Sprintf("%s exited (%s)", r.Node, r.Reason)
	}
	return ""
}
