package bench

import (
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// WriteTable prints the report as aligned tables.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "machine: %s, %s cpus, %s/%s, %s, PostgreSQL %s\n", r.Machine["cpu"], r.Machine["cpus"],
		r.Machine["goos"], r.Machine["goarch"], r.Machine["go"], r.Machine["postgresql"])
	fmt.Fprintf(w, "timing: heartbeat %s, timeout %s, trust window %s, session lease %s %s\n\n", r.Timing["heartbeat_interval"],
		r.Timing["heartbeat_timeout"], r.Timing["trust_window"], r.Timing["session_lease"], r.Timing["node_args"])
	if len(r.Stats) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\tn\tmin ms\tmedian ms\tp99 ms\tmax ms\t")
		for _, s := range r.Stats {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t\n", s.Name, s.N, s.MinMS, s.MedianMS, s.P99MS, s.MaxMS)
		}
		tw.Flush()
		for _, s := range r.Stats {
			fmt.Fprintf(w, "  %s: %s\n", s.Name, s.What)
		}
		fmt.Fprintln(w, "  p99 is the nearest-rank 99th percentile (with n ≤ 100 it is the largest sample)")
		fmt.Fprintln(w)
	}
	if len(r.Gate) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
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
}
