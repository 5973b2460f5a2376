package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the verdict of every scenario, then every violation.
func WriteTable(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tverdict\tfaults\ttakeovers\tfailover p50/max\tdetect p50/max\tleaderless\toverlap\tstale rej/acc\tack/rej/unk\ttrans/min")
	for _, r := range rs {
		if r.Skipped != "" {
			fmt.Fprintf(tw, "%s\tSKIP\t\t\t\t\t\t\t\t\t\tskipped: %s\n", r.Scenario, r.Skipped)
			continue
		}
		f := r.Report.Figures
		verdict := "PASS"
		if !r.OK() {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d/%d\t%d/%d/%d\t%.1f\n",
			r.Scenario, verdict, r.Faults, len(f.Failovers), spread(f.Failovers), spread(f.Detections),
			round(f.Leaderless), round(f.GateOverlap), f.StaleRejected, f.StaleAccepted,
			f.Acked, f.Rejected, f.Unknown, f.TransitionsPerMin)
	}
	tw.Flush()
	for _, r := range rs {
		var lines []string
		if r.Err != "" {
			lines = append(lines, "run error: "+r.Err)
		}
		for _, v := range r.Report.Violations {
			lines = append(lines, fmt.Sprintf("%s %s: %s", v.Rule, v.Scope, v.Detail))
		}
		for _, m := range r.Report.Missing {
			lines = append(lines, "expected but missing: "+m)
		}
		lines = append(lines, r.Extra...)
		if len(lines) > 0 {
			fmt.Fprintf(w, "\n%s:\n  %s\n", r.Scenario, strings.Join(lines, "\n  "))
		}
	}
}

func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%s/%s", round(s[len(s)/2]), round(s[len(s)-1]))
}

func round(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
