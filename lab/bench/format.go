package bench

import (
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"text/tabwriter"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// WriteTable prints the report as aligned tables.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "machine: %s, %s cpus, %s/%s, %s, PostgreSQL %s\n", r.Machine["cpu"], r.Machine["cpus"],
		r.Machine["goos"], r.Machine["goarch"], r.Machine["go"], r.Machine["postgresql"])
	fmt.Fprintf(w, "timing: heartbeat %s, timeout %s, trust window %s, session lease %s %s\n", r.Timing["heartbeat_interval"],
		r.Timing["heartbeat_timeout"], r.Timing["trust_window"], r.Timing["session_lease"], r.Timing["node_args"])
	if r.Mode == "lease" {
		fmt.Fprintf(w, "mode: lease, every node through %s\n", r.Timing["pooler"])
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s\n", s)
	}
	fmt.Fprintln(w)
	if len(r.Stats) > 0 || r.Limit != nil {
		rows := r.Stats
		if r.Limit != nil {
			rows = append([]Stat{*r.Limit}, rows...)
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "scenario\tn\tmin ms\tmedian ms\tp99 ms\tmax ms\tp50 × limit\tp99 × limit\t")
		for _, s := range rows {
			p50, p99 := ratioCells(s)
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", s.Name, s.N, s.MinMS, s.MedianMS, s.P99MS, s.MaxMS, p50, p99)
		}
		tw.Flush()
		for _, s := range rows {
			fmt.Fprintf(w, "  %s: %s\n", s.Name, s.What)
		}
		fmt.Fprintln(w, "  p99 is the nearest-rank 99th percentile (with n ≤ 100 it is the largest sample)")
		if r.Limit != nil {
			fmt.Fprintln(w, "  × limit: the figure divided by the physical limit's (same run, same server)")
		}
		if r.Mode == "lease" && r.Limit != nil {
			fmt.Fprintln(w, "  (the limit is lock mode's; a lease-mode follower must wait out the lease, so its bound is the lease plus an interval)")
		}
		fmt.Fprintln(w)
	}
	if len(r.Gate) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "gate check\tns/op\tallocs/op\t")
		for _, g := range r.Gate {
			fmt.Fprintf(tw, "%s\t%.1f\t%d\t\n", g.Name, g.NsPerOp, g.AllocsPerOp)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	if l := r.Load; l != nil {
		fmt.Fprintf(w, "idle load: %d nodes, %.1f s: %d transactions = %.2f per node per heartbeat interval\n  (%s)\n",
			l.Nodes, l.Seconds, l.Transactions, l.PerNodePerInterval, l.Note)
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w)
		writeTargets(w, r.Targets)
	}
}

func writeTargets(w io.Writer, ts []Target) {
	for _, t := range ts {
		switch {
		case t.Unit != "" && t.Max == 0:
			fmt.Fprintf(w, "target %s: %.2f %s (min %.2f) → %s", t.Name, t.Value, t.Unit, t.Min, t.Verdict)
		case t.Unit != "":
			fmt.Fprintf(w, "target %s: %.2f %s (max %.2f) → %s", t.Name, t.Value, t.Unit, t.Max, t.Verdict)
		default:
			fmt.Fprintf(w, "target %s: %.2f× → %s", t.Name, t.Ratio, t.Verdict)
		}
		if t.Note != "" {
			fmt.Fprintf(w, " (%s)", t.Note)
		}
		fmt.Fprintln(w)
	}
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}

// ratioCells are a row's "× limit" cells; the limit's own row reads 1.00.
func ratioCells(s Stat) (p50, p99 string) {
	switch {
	case s.VsLimit != nil:
		return fmt.Sprintf("%.2f", s.VsLimit.P50Ratio), fmt.Sprintf("%.2f", s.VsLimit.P99Ratio)
	case s.Name == limitStatName:
		return "1.00", "1.00"
	}
	return "", ""
}

// WriteTable prints the scale report.
func (r *ScaleReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "machine: %s, %s cpus, %s/%s, %s, PostgreSQL %s\n", r.Machine["cpu"], r.Machine["cpus"],
		r.Machine["goos"], r.Machine["goarch"], r.Machine["go"], r.Machine["postgresql"])
	fmt.Fprintf(w, "timing: heartbeat %s, timeout %s, trust window %s, session lease %s %s\n\n", r.Timing["heartbeat_interval"],
		r.Timing["heartbeat_timeout"], r.Timing["trust_window"], r.Timing["session_lease"], r.Timing["node_args"])
	if r.Led == r.Scopes {
		fmt.Fprintf(w, "%d nodes × %d scopes: every scope led %.0f ms after the start\n", r.Nodes, r.Scopes, r.AllLedMS)
	} else {
		fmt.Fprintf(w, "%d nodes × %d scopes: only %d scopes led\n", r.Nodes, r.Scopes, r.Led)
	}
	if len(r.PerNode) > 0 {
		fmt.Fprintf(w, "server connections of the nodes: %d (max_connections %d)\n\n", r.Connections, r.MaxConnections)
		tw := newTable(w)
		fmt.Fprintln(tw, "node\tled\tconnections\tby role\tRSS MiB\tidle CPU %\t")
		for _, f := range r.PerNode {
			var roles []string
			for role, n := range f.ByRole {
				roles = append(roles, fmt.Sprintf("%s %d", role, n))
			}
			sort.Strings(roles)
			name := f.Node
			if f.Killed {
				name += " (killed)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.1f\t%.2f\t\n", name, f.Led, f.Connections, strings.Join(roles, ", "), float64(f.RSSKiB)/1024, f.IdleCPUPct)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	if l := r.Load; l != nil {
		fmt.Fprintf(w, "idle load: %d nodes, %.1f s: %d transactions = %.2f per node per heartbeat interval\n  (%s)\n\n",
			l.Nodes, l.Seconds, l.Transactions, l.PerNodePerInterval, l.Note)
	}
	var rows []Stat
	if r.Limit != nil {
		rows = append(rows, *r.Limit)
	}
	if r.Takeover != nil {
		rows = append(rows, *r.Takeover)
	}
	if len(rows) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "figure\tn\tp50 ms\tp99 ms\tmax ms\tp50 × limit\tp99 × limit\t")
		for _, s := range rows {
			p50, p99 := ratioCells(s)
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", s.Name, s.N, s.MedianMS, s.P99MS, s.MaxMS, p50, p99)
		}
		tw.Flush()
		for _, s := range rows {
			fmt.Fprintf(w, "  %s: %s\n", s.Name, s.What)
		}
	}
	if r.Killed != "" {
		fmt.Fprintf(w, "killed %s, which led %d scopes: %d led again", r.Killed, r.KilledLed, r.ReLed)
		if r.AllReLed {
			fmt.Fprintln(w, " (all)")
		} else {
			fmt.Fprintf(w, " — %d NOT led again within the timeout\n", r.KilledLed-r.ReLed)
		}
	}
}
