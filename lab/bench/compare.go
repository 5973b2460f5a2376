package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
)

// Baseline is an earlier build measured beside this one in the same run: its
// pgleader binary, and a database on the same server that its own `pgleader
// migrate` migrated (so that its nodes run its own SQL).
type Baseline struct {
	Label string // what it is, e.g. a commit ("a00a362")
	Bin   string
	DSN   string
}

// Comparison is an A/B run: the same scenarios, alternately on the baseline and
// on this build, Pairs times, each side on its own database of one server, each
// run with its own physical-limit samples.
type Comparison struct {
	Baseline string            `json:"baseline"`
	Pairs    int               `json:"pairs"`
	Rows     []ABRow           `json:"rows"`
	Current  []*Report         `json:"current"`
	Base     []*Report         `json:"baseline_runs"`
	Machine  map[string]string `json:"machine"`
}

// ABRow is one figure, pair by pair and over every pair's samples.
type ABRow struct {
	Name  string   `json:"name"`
	Pairs []ABPair `json:"pairs"`
	// Pooled: every pair's samples together.
	PooledCurrent Quantiles `json:"pooled_current"`
	PooledBase    Quantiles `json:"pooled_baseline"`
}

// ABPair is one pair's figure on each side.
type ABPair struct {
	Current Quantiles `json:"current"`
	Base    Quantiles `json:"baseline"`
}

// Quantiles are a figure's p50 and p99 in milliseconds, over N samples.
type Quantiles struct {
	N     int     `json:"n"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
}

// Compare runs o's scenarios pairs times on each side, alternating which side
// goes first (baseline first in odd pairs), so that drift of the machine over the
// run falls on both alike. The physical limit is always sampled with o.Bin.
func Compare(ctx context.Context, o Options, b Baseline, pairs int) (*Comparison, error) {
	if pairs < 1 {
		return nil, fmt.Errorf("need at least one pair (got %d)", pairs)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	c := &Comparison{Baseline: b.Label, Pairs: pairs, Machine: machine(ctx, o.DSN)}
	base := o
	base.NodeBin, base.DSN = b.Bin, b.DSN
	for i := range pairs {
		sides := []bool{true, false} // baseline, current
		if i%2 == 1 {
			sides = []bool{false, true}
		}
		for _, isBase := range sides {
			opts, who := o, "this build"
			if isBase {
				opts, who = base, "baseline "+b.Label
			}
			fmt.Fprintf(o.Progress, "pair %d/%d: %s\n", i+1, pairs, who)
			rep, err := Run(ctx, opts)
			if err != nil {
				return c, fmt.Errorf("pair %d, %s: %w", i+1, who, err)
			}
			if isBase {
				c.Base = append(c.Base, rep)
			} else {
				c.Current = append(c.Current, rep)
			}
		}
	}
	c.rows()
	return c, nil
}

// rows builds Rows from the runs: every failover figure and the limit.
func (c *Comparison) rows() {
	stats := func(r *Report) []Stat {
		out := slices.Clone(r.Stats)
		if r.Limit != nil {
			out = append([]Stat{*r.Limit}, out...)
		}
		return out
	}
	var names []string
	for _, r := range c.Current {
		for _, s := range stats(r) {
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	find := func(r *Report, name string) (Stat, bool) {
		for _, s := range stats(r) {
			if s.Name == name {
				return s, true
			}
		}
		return Stat{}, false
	}
	for _, name := range names {
		row := ABRow{Name: name}
		var cur, base []float64
		for i := range c.Current {
			sc, ok1 := find(c.Current[i], name)
			sb, ok2 := find(c.Base[i], name)
			if !ok1 || !ok2 {
				continue
			}
			row.Pairs = append(row.Pairs, ABPair{Current: quantiles(sc.Samples), Base: quantiles(sb.Samples)})
			cur, base = append(cur, sc.Samples...), append(base, sb.Samples...)
		}
		if len(row.Pairs) == 0 {
			continue
		}
		row.PooledCurrent, row.PooledBase = quantiles(cur), quantiles(base)
		c.Rows = append(c.Rows, row)
	}
}

func quantiles(xs []float64) Quantiles {
	s := summarize("", "", xs)
	return Quantiles{N: s.N, P50MS: s.MedianMS, P99MS: s.P99MS}
}

// WriteTable prints each figure pair by pair, then pooled, with this build's
// difference to the baseline (negative: faster) and ratio.
func (c *Comparison) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "machine: %s, %s cpus, PostgreSQL %s\n", c.Machine["cpu"], c.Machine["cpus"], c.Machine["postgresql"])
	fmt.Fprintf(w, "A/B: this build against baseline %s, %d alternating pairs (each side its own database on one server)\n\n", c.Baseline, c.Pairs)
	tw := newTable(w)
	fmt.Fprintln(tw, "figure\tpair\tbaseline p50 / p99 ms\tthis build p50 / p99 ms\tΔ p50 ms\tp50 ×\tp99 ×\t")
	line := func(name, pair string, b, cu Quantiles) {
		fmt.Fprintf(tw, "%s\t%s\t%.2f / %.2f\t%.2f / %.2f\t%+.2f\t%.2f\t%.2f\t\n", name, pair, b.P50MS, b.P99MS, cu.P50MS, cu.P99MS,
			cu.P50MS-b.P50MS, ratio(cu.P50MS, b.P50MS), ratio(cu.P99MS, b.P99MS))
	}
	for _, r := range c.Rows {
		for i, p := range r.Pairs {
			line(r.Name, fmt.Sprint(i+1), p.Base, p.Current)
		}
		line(r.Name, "all", r.PooledBase, r.PooledCurrent)
	}
	tw.Flush()
	fmt.Fprintln(w, "  Δ: this build minus the baseline; ×: this build divided by the baseline (below 1: faster)")
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
