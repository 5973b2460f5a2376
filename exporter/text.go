package exporter

import (
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// The fleet's /metrics is written straight from the snapshots in the text
// exposition format (0.0.4), without a registry: a registry builds a protobuf
// metric per series, checks it, and sorts every family before the encoder walks
// it again, which over ten databases of 1,000 scopes (180,000 series) cost most
// of a second of CPU per scrape and, on two busy cores, several seconds of wall
// time. The page is the same as the registry's (TestFleetTextMatchesRegistry):
// the same families with the same HELP and TYPE, the same series with their
// labels in name order and their values formatted alike, a series that would
// repeat one of its family left out (the registry refuses it too). The
// process's own metrics (go_*, process_*) still come from a registry.

// textSink collects the series of a scrape per family, in the text format.
type textSink struct {
	fams []*textFamily // per descSpec.idx
	e    *Exporter     // the Exporter emitting now
	line []byte        // scratch
}

// textFamily is one metric family's samples.
type textFamily struct {
	typ  prometheus.ValueType
	body []byte
	// seen holds the label parts of the samples that carry an escaped value:
	// only an escape can make two series of a snapshot alike (scope names, node
	// ids and alert keys are unique in it, and collectSnapshot leaves out the
	// repeats it could see), and a repeated series is an error the registry
	// refuses. Checking only those keeps a map lookup off every series.
	seen map[string]struct{}
}

func newTextSink() *textSink { return &textSink{fams: make([]*textFamily, len(specs))} }

func (t *textSink) add(d *prometheus.Desc, typ prometheus.ValueType, v float64, values []string) {
	sp := specs[d]
	f := t.fams[sp.idx]
	if f == nil {
		f = &textFamily{typ: typ}
		t.fams[sp.idx] = f
	}
	l := append(t.line[:0], sp.name...)
	start := len(l)
	l = appendLabels(l, t.e.layouts[sp.idx], values)
	if escaped(values) {
		if f.seen == nil {
			f.seen = map[string]struct{}{}
		}
		key := string(l[start:])
		if _, dup := f.seen[key]; dup {
			return
		}
		f.seen[key] = struct{}{}
	}
	l = append(l, ' ')
	l = appendFloat(l, v)
	l = append(l, '\n')
	f.body = append(f.body, l...)
	t.line = l
}

// escaped reports whether a label value shows an escape (labelValues wrote
// one, or the name held a backslash itself).
func escaped(values []string) bool {
	for _, v := range values {
		if strings.IndexByte(v, '\\') >= 0 {
			return true
		}
	}
	return false
}

// labelSlot is one label of a series, in the order the text format writes
// them (by name, as the registry does): a constant label's name="value" ready
// to write, or the name of the variable label values[index].
type labelSlot struct {
	text  string // name="escaped value" of a constant label; else name
	index int    // of the variable label's value; -1 for a constant label
}

// layouts is, per descriptor of the package (descSpec.idx), its labels with
// constLabels in name order.
func layouts(constLabels prometheus.Labels) [][]labelSlot {
	out := make([][]labelSlot, len(specs))
	for _, sp := range specs {
		type named struct {
			name string
			slot labelSlot
		}
		var ls []named
		for n, v := range constLabels {
			ls = append(ls, named{n, labelSlot{text: n + `="` + string(appendEscaped(nil, v, true)) + `"`, index: -1}})
		}
		for i, n := range sp.labels {
			ls = append(ls, named{n, labelSlot{text: n, index: i}})
		}
		slices.SortFunc(ls, func(x, y named) int { return strings.Compare(x.name, y.name) })
		for _, l := range ls {
			out[sp.idx] = append(out[sp.idx], l.slot)
		}
	}
	return out
}

// appendLabels appends {name="value",…} of a series laid out as slots, or
// nothing when it has no label.
func appendLabels(b []byte, slots []labelSlot, values []string) []byte {
	if len(slots) == 0 {
		return b
	}
	b = append(b, '{')
	for i, s := range slots {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, s.text...)
		if s.index >= 0 {
			b = append(b, '=', '"')
			b = appendEscaped(b, values[s.index], true)
			b = append(b, '"')
		}
	}
	return append(b, '}')
}

// appendEscaped escapes s as the text format wants a label value (backslash,
// line feed and double quote) or a HELP text (backslash and line feed).
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat formats v as the text format's encoder does.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// writeText writes the series of exporters, family by family in the package's
// order, then the families of process (nil: none).
func writeText(w io.Writer, exporters []*Exporter, process prometheus.Gatherer) error {
	t := newTextSink()
	for _, e := range exporters {
		t.e = e
		e.emit(t)
	}
	var b []byte
	for _, d := range allDescs {
		sp := specs[d]
		f := t.fams[sp.idx]
		if f == nil {
			continue
		}
		b = append(b[:0], "# HELP "...)
		b = append(b, sp.name...)
		b = append(b, ' ')
		b = appendEscaped(b, sp.help, false)
		b = append(b, "\n# TYPE "...)
		b = append(b, sp.name...)
		if f.typ == prometheus.CounterValue {
			b = append(b, " counter\n"...)
		} else {
			b = append(b, " gauge\n"...)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		if _, err := w.Write(f.body); err != nil {
			return err
		}
	}
	if process == nil {
		return nil
	}
	fams, err := process.Gather()
	for _, mf := range fams {
		if _, werr := expfmt.MetricFamilyToText(w, mf); werr != nil {
			return werr
		}
	}
	return err
}

// textHandler serves writeText over exporters, gzipped when the client takes
// it (Prometheus does), at most 4 at a time (503 beyond, as promhttp).
func textHandler(exporters []*Exporter, process prometheus.Gatherer) http.Handler {
	inFlight := make(chan struct{}, 4)
	contentType := string(expfmt.NewFormat(expfmt.TypeTextPlain))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case inFlight <- struct{}{}:
			defer func() { <-inFlight }()
		default:
			http.Error(w, "too many concurrent scrapes", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", contentType)
		var out io.Writer = w
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
			defer gz.Close()
			out = gz
		}
		_ = writeText(out, exporters, process)
	})
}
