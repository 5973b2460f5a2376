// Package tui is pgleader's on-call dashboard (`pgleader top`), written with
// Bubble Tea.
//
// The dashboard renders nothing but collector output: it reads immutable
// [collector.Snapshot]s and the ordered [collector.Event] stream through the
// [Feed] interface, which *collector.Collector satisfies, and never talks to
// PostgreSQL or to the nodes itself. Operator actions (asking a leader to resign,
// evicting one, handing a scope over to its best follower) and the demo's fault
// keys come in through two optional
// interfaces, [Actions] and [Faults]; without them the dashboard is strictly
// read-only.
//
// Layout, top to bottom: a header with one verdict per scope (glyph + word, so
// it reads without colour), the alert banner, then the panes — scopes, nodes,
// terms (a timeline strip per scope and the recent terms) and the event log —
// and a footer with the status line and the key help. The scopes and nodes
// panes get their rows, the terms pane its timeline and a few recent terms;
// the rows left go to the event log, and only what it cannot fill to the
// rest of the terms. Below 100×32 the layout is compact: the terms pane
// takes the nodes pane's place while it has the focus (tab). Enter on a scope or a node opens its detail view; ? lists
// every key (j/k scroll it, / searches it). On the event log a cursor selects a line (it follows the
// newest until moved, like the log's tail, and again once the operator
// leaves the pane or presses Esc on it); Enter shows that line whole,
// wrapped, with the event's fields, and on a flood's one line ("heartbeat
// late on 252 scopes") lists its member events; Esc goes back.
//
// The dashboard is in one mode at a time (mode.go): a view — the panes, or
// the detail of one scope, node or event line — and over it at most one
// overlay, which has the keyboard: the filter line, the help screen (read,
// or typing into its search line), an action's y/N question or the database
// picker. A key's meaning is decided in one place, handleKey: the overlay
// takes the key first, then the replay keys, the fault keys and the keys
// that mean the same in every view, then the view's own; footerKeys lists
// the keys of the same mode. Pause and replay are states of the feed, not
// modes: every view works in them, and replay refuses the keys that act on
// the live cluster.
//
// The terms say what happened, not what was last written: a term is held
// until its holder's last sign of life (collector.Term.LastSign), so a
// crash or a database outage is the next term's GAP BEFORE, not time held,
// and an open term whose holder leads no more reads "holder silent since
// 21:53:58", never "(leading)"; its timeline strip stops there. A replayed
// moment is settled the same way from its own rows.
//
// At scale (hundreds or thousands of scopes) nothing lists every scope: the
// header counts the verdicts ("998 ✔ OK · 2 ✖ NO LEADER") and names only the
// scopes in trouble, as many as fit; the tables draw only their visible rows
// and page (PgUp/PgDn, Home/End); / filters by substring and p keeps the
// problems. An IDLE scope (no leader, and nobody meant to lead: its candidates
// stopped cleanly) is not trouble: it is counted, shown muted, never named
// and left out by p; retired scopes are not in the snapshot and only counted
// ("3 retired"). The per-snapshot work (sorting, cells) is done once per snapshot
// or filter change, never per frame.
//
// Over several databases (a [collector.Fleet]: Snapshot.Databases) every
// table gets a DATABASE column, the header counts the verdicts per database
// (the ones in trouble first: "orders ✖ UNREACHABLE 14s │ billing 998 ✔ · 2
// ✖ │ reports 1000 ✔", compact when they do not fit: "… │ 8 OK"), and d
// opens a picker (k9s's namespaces) that narrows every pane, the event log
// included, to one database, or shows all; / and p work across databases;
// [ replays all of them (ReplayFleet), each row naming its database. Scope names and node ids
// repeat across databases, so rows, cursors, detail views, heartbeat
// histories and the timeline's holders are keyed by (database, name) (fleet.go);
// with one database the key is the name and nothing on screen changes. A
// database that cannot be read keeps its last-known rows, greyed, the
// verdict marked "? was OK" (never counted as NO LEADER, sorted as unknown:
// after what is known wrong, before what is known fine), its timeline strips
// cut at its last read; actions go to the scope's database
// ([ActionsByDatabase]).
//
// Data handling rules, for the 3 a.m. reader:
//
//   - The last good snapshot always stays on screen. When the collector reports
//     it is disconnected or failing, the data is dimmed and the error is shown in
//     the status line; the screen is never blanked.
//   - Pausing (space) stops applying snapshots but keeps collecting events, which
//     are appended when the pause ends.
//   - Cursors follow a row's key (scope name, node id), not its index, so a
//     refresh that reorders or adds rows does not move the selection. The
//     terms table (newest first) is the exception while its cursor is on the
//     newest term: like the event log's tail, it follows the newest term until
//     the operator moves off it, and Home follows again.
//   - The timeline gives each node that led in its window one mark (glyph, and
//     colour) from a palette of eight, kept while the node stays in the
//     window; beyond eight the legend counts the holders it cannot tell apart.
//     A database failover (new WAL timeline) is marked ⇄ on the time axis.
//   - Colours: Options.Theme picks palettes for light or dark backgrounds, each
//     tone at WCAG contrast ≥ 4.5:1 against white or black; the default asks the
//     terminal, and until it answers draws colours at ≥ 3:1 against both. The
//     cursor row keeps each cell's colour. NoColor / NO_COLOR draw no colour at
//     all.
//   - Every string the database or a node wrote (names, hosts, versions, alert
//     texts, event details, errors) is shown through termsafe.String: an escape
//     sequence, a line break or a text-direction control in a name shows as an
//     escape instead of acting on the terminal. Table cells are escaped once per
//     snapshot (table.setRows), event lines once on arrival, the status line in
//     setStatus; row keys keep the raw name, which is what an action acts on.
//
// [RenderOnce] renders one frame as plain text or the data as JSON for
// `pgleader top --once`.
//
// Its Go API is not covered by pgleader's compatibility promise (README,
// "Versioning"): it changes when pgleader needs it to.
package tui
