package exporter

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
)

// DatabaseLabel is the label every pgleader_* series carries: the name of the
// database it describes (a target of the config file, or the database name of a
// lone --dsn), so that one exporter serves a fleet and every rule and panel
// aggregates per database.
const DatabaseLabel = "database"

// Member is one database of a Fleet.
type Member struct {
	// Name is the value of the database label: unique within the fleet.
	Name string
	// Source is the collector reading the database.
	Source SnapshotSource
}

// Fleet serves the metrics of several databases from one process: every
// member's series labelled database="NAME". A scrape renders each member's
// newest snapshot and never waits on a database: a member whose collector
// cannot read is served as pgleader_collector_up{database="NAME"} 0, without
// its scope, node and lock series (its last figures describe the past), and
// the others as usual.
type Fleet struct {
	members []Member
	exps    []*Exporter          // per member, in order: what /metrics writes (text.go)
	process *prometheus.Registry // the process's own collectors
	// all holds every member's collector and the process's in one registry:
	// registering them there checks them against each other (NewFleet fails
	// on a conflict), and its page is /metrics' as a registry would write it,
	// which the tests compare text.go's with.
	all *prometheus.Registry
}

// labelValue is what a member name may be: a label value, a URL query value and
// a column of the dashboard.
var labelValue = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ValidDatabaseName reports whether name may name a member of a Fleet (and a
// target of pgleader's config file): 1–63 letters, digits, '_', '.' or '-',
// starting with a letter or digit.
func ValidDatabaseName(name string) bool { return labelValue.MatchString(name) }

// NewFleet returns the exporter of members; process are collectors of the
// process itself (Go runtime, process), served once on /metrics without a
// database label. A name given twice or not a valid name is an error.
func NewFleet(members []Member, opts Options, process ...prometheus.Collector) (*Fleet, error) {
	if len(members) == 0 {
		return nil, errors.New("exporter: a fleet needs at least one database")
	}
	f := &Fleet{members: members, all: prometheus.NewRegistry(), process: prometheus.NewRegistry()}
	seen := map[string]bool{}
	for _, m := range members {
		if !labelValue.MatchString(m.Name) {
			return nil, fmt.Errorf("exporter: database name %q: use 1–63 letters, digits, '_', '.' or '-'", m.Name)
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("exporter: database %q is given twice", m.Name)
		}
		mopts := opts
		mopts.ConstLabels = prometheus.Labels{DatabaseLabel: m.Name}
		for k, v := range opts.ConstLabels {
			mopts.ConstLabels[k] = v
		}
		e := New(m.Source, mopts)
		if err := f.all.Register(e); err != nil {
			return nil, fmt.Errorf("exporter: database %q: %w", m.Name, err)
		}
		f.exps = append(f.exps, e)
		seen[m.Name] = true
	}
	for _, c := range process {
		if err := f.all.Register(c); err != nil {
			return nil, fmt.Errorf("exporter: %w", err)
		}
		if err := f.process.Register(c); err != nil {
			return nil, fmt.Errorf("exporter: %w", err)
		}
	}
	return f, nil
}

// Ready is the readiness check of the fleet, for Handler: nil while at least one
// member is ready (the others show as pgleader_collector_up 0, which is what the
// alerts need: taking the exporter out of service would blind them to the
// databases it still reads), else the first member's reason. Each member's
// changes of readiness are logged with its name.
func (f *Fleet) Ready(logger *slog.Logger) func() error {
	if logger == nil {
		logger = slog.Default()
	}
	checks := make([]func() error, len(f.members))
	for i, m := range f.members {
		checks[i] = Ready(m.Source, logger.With("target", m.Name))
	}
	return func() error {
		var first error
		ready := false
		for _, check := range checks { // every one: each logs its own changes
			if err := check(); err == nil {
				ready = true
			} else if first == nil {
				first = err
			}
		}
		if ready {
			return nil
		}
		return first
	}
}

// Handler serves the fleet: Handler's endpoints over every member, and
//
//	/probe?target=NAME  one member's metrics only (the multi-target pattern of
//	                    blackbox_exporter: Prometheus fans out with relabelling);
//	                    400 for a missing or unknown name
func (f *Fleet) Handler(ready func() error) http.Handler {
	// One text handler per page, made once: each keeps its own bound on
	// concurrent scrapes and the sizes of its families at the previous one.
	probes := make(map[string]http.Handler, len(f.exps))
	for i, m := range f.members {
		probes[m.Name] = textHandler(f.exps[i:i+1], nil)
	}
	return handlerOf(textHandler(f.exps, f.process), ready, func(w http.ResponseWriter, r *http.Request) {
		probe(probes, w, r)
	})
}

// probe is the /probe endpoint: the page of the member the target parameter
// names, from probes.
func probe(probes map[string]http.Handler, w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("target")
	h := probes[name]
	if h == nil {
		if name == "" {
			text(w, http.StatusBadRequest, "target parameter missing: /probe?target=NAME\n")
			return
		}
		// The name is echoed only when it is one a target could have: nothing a
		// caller writes reaches the page otherwise.
		shown := "the target"
		if labelValue.MatchString(name) {
			shown = "target " + name
		}
		text(w, http.StatusBadRequest, shown+" is not served here; /probe?target=NAME takes a database of this exporter\n")
		return
	}
	h.ServeHTTP(w, r)
}
