package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// onceJSON is RenderOnce's JSON document.
type onceJSON struct {
	Snapshot *collector.Snapshot `json:"snapshot"`
	Events   []collector.Event   `json:"events"`
}

// RenderOnce writes one frame for `pgleader top --once`: with format "text",
// every section of the dashboard in full (no scrolling, nothing cut but cells
// wider than width) as plain text without escape codes, names shown as on the
// dashboard (termsafe.String); with format "json", the snapshot and the events
// as one JSON document, exact but inert (termsafe.JSON). width <= 0 means no
// width limit.
func RenderOnce(w io.Writer, snap *collector.Snapshot, events []collector.Event, format string, width int) error {
	if snap == nil {
		return errors.New("tui: no snapshot to render")
	}
	switch format {
	case "json":
		if events == nil {
			events = []collector.Event{}
		}
		doc, err := json.MarshalIndent(onceJSON{Snapshot: snap, Events: events}, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(termsafe.JSON(doc), '\n'))
		return err
	case "text", "":
		_, err := io.WriteString(w, renderText(snap, events, width))
		return err
	default:
		return fmt.Errorf("tui: unknown format %q (want text or json)", format)
	}
}

// renderText lays every section out one after the other.
func renderText(snap *collector.Snapshot, events []collector.Event, width int) string {
	m := New(staticFeed{snap}, Options{NoColor: true, Now: func() time.Time { return snap.At }})
	m.stop()
	for _, e := range events {
		m.events.add(e)
	}
	m.ensureRows()
	st := m.look
	lw := width // for lines that must be cut somewhere
	if lw <= 0 {
		lw = 1 << 16
	}
	var out []string
	h := snap.Health
	src, _ := sourceLabel(h)
	head := fmt.Sprintf("%s · %s · %s · snapshot %d read at %s", m.opts.Title, m.database(), src, snap.Seq, fmtStamp(snap.At))
	if info := snap.Replay; info != nil {
		out = append(out, truncate(replayBanner(info, info.DBNow, lw), lw))
		for _, n := range info.Notes {
			out = append(out, truncate("  note: "+n, lw))
		}
	}
	out = append(out, truncate(head, lw), m.verdictLine(lw))
	if h.LastError != "" {
		out = append(out, truncate("✖ last error: "+termsafe.String(h.LastError), lw))
	}
	for _, a := range snap.Alerts {
		label, _ := severityLabel(a.Severity)
		out = append(out, truncate(alertHead(label, a)+": "+termsafe.String(a.Summary), lw))
		out = append(out, truncate("  → "+termsafe.String(a.Hint)+"  ("+termsafe.String(a.Runbook)+")", lw))
	}
	section := func(title string) {
		out = append(out, "", title)
	}
	section(fmt.Sprintf("SCOPES %d", len(snap.Scopes)))
	out = append(out, m.scopes.render(st, width, len(m.scopes.rows), false)...)
	section(fmt.Sprintf("NODES %d", len(snap.Nodes)))
	out = append(out, m.nodes.render(st, width, len(m.nodes.rows), false)...)

	tw := width
	if tw <= 0 {
		tw = 100
	}
	names := make([]string, len(m.scopes.rows))
	for i, r := range m.scopes.rows {
		names[i] = r.key
	}
	strip, legend := m.timelineLines(st, tw, 1+len(names), names)
	section("TERMS · last " + fmtAxis(timelineWindow) + "  " + legend)
	out = append(out, strip...)
	out = append(out, "")
	out = append(out, m.terms.render(st, width, len(m.terms.rows), false)...)

	section(fmt.Sprintf("EVENTS %d", len(events)))
	if len(events) == 0 {
		out = append(out, "  none")
	}
	for _, e := range m.events.entries {
		out = append(out, truncate(e.line, lw))
	}
	var b strings.Builder
	for _, l := range out {
		b.WriteString(strings.TrimRight(ansi.Strip(l), " "))
		b.WriteByte('\n')
	}
	// The cursor marker means nothing on paper.
	return strings.ReplaceAll(b.String(), "\n▸ ", "\n  ")
}

// staticFeed serves one snapshot.
type staticFeed struct{ snap *collector.Snapshot }

func (f staticFeed) Snapshot() *collector.Snapshot { return f.snap }
func (f staticFeed) Updates() (<-chan *collector.Snapshot, func()) {
	return nil, func() {}
}
func (f staticFeed) Subscribe(int) (<-chan collector.Event, func()) { return nil, func() {} }
func (f staticFeed) Refresh()                                       {}
func (f staticFeed) SetPollInterval(time.Duration)                  {}
func (f staticFeed) PollInterval() time.Duration                    { return 0 }
