package exporter_test

// The helpers here do what prometheus/testutil's CollectAndCompare, GatherAndCompare,
// CollectAndCount and CollectAndLint do, with the same semantics (a pedantic
// registry; metric names filter both sides; HELP, TYPE and every sample compared).
// testutil itself cannot be imported yet: it needs github.com/kylelemons/godebug,
// which go.mod does not list, and go.mod is not this package's to change. Once it
// does, each helper can be replaced by its testutil namesake.

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func collectAndCompare(c prometheus.Collector, expected string, names ...string) error {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("registering collector failed: %w", err)
	}
	return gatherAndCompare(reg, expected, names...)
}

func gatherAndCompare(g prometheus.Gatherer, expected string, names ...string) error {
	got, err := g.Gather()
	if err != nil {
		return fmt.Errorf("gathering metrics failed: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := parser.TextToMetricFamilies(strings.NewReader(expected))
	if err != nil {
		return fmt.Errorf("parsing expected metrics: %w", err)
	}
	var want []*dto.MetricFamily
	for _, mf := range byName {
		want = append(want, mf)
	}
	gotLines, err := textLines(filter(got, names))
	if err != nil {
		return err
	}
	wantLines, err := textLines(filter(want, names))
	if err != nil {
		return err
	}
	if slices.Equal(gotLines, wantLines) {
		return nil
	}
	var b strings.Builder
	b.WriteString("metrics differ (- want, + got):\n")
	for _, l := range wantLines {
		if !slices.Contains(gotLines, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range gotLines {
		if !slices.Contains(wantLines, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return fmt.Errorf("%s", b.String())
}

func collectAndCount(c prometheus.Collector, names ...string) int {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	got, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	n := 0
	for _, mf := range filter(got, names) {
		n += len(mf.GetMetric())
	}
	return n
}

func collectAndLint(c prometheus.Collector) ([]promlint.Problem, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	got, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	return lintFamilies(got)
}

func lintFamilies(mfs []*dto.MetricFamily) ([]promlint.Problem, error) {
	return promlint.NewWithMetricFamilies(mfs).Lint()
}

func filter(mfs []*dto.MetricFamily, names []string) []*dto.MetricFamily {
	if len(names) == 0 {
		return mfs
	}
	var out []*dto.MetricFamily
	for _, mf := range mfs {
		if slices.Contains(names, mf.GetName()) {
			out = append(out, mf)
		}
	}
	return out
}

// textLines encodes families in the text format and returns the lines sorted, so
// that the order of families and samples does not matter.
func textLines(mfs []*dto.MetricFamily) ([]string, error) {
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) == 1 && lines[0] == "" {
		lines = nil
	}
	slices.Sort(lines)
	return lines, nil
}
