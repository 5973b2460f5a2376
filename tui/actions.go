package tui

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/pgleader/pgleader/collector"
	"github.com/pgleader/pgleader/internal/termsafe"
)

// actionTimeout bounds one operator action or fault.
const actionTimeout = 15 * time.Second

// actionKind is the operator action a confirmation asks about.
type actionKind int

const (
	actionEvict    actionKind = iota // terminate the leader's session (Actions.Evict)
	actionResign                     // a graceful resign through the database (Actions.Resign)
	actionHandover                   // a handover to the best follower (Actions.Handover)
)

// actionWords name each action in messages.
var actionWords = [...]struct {
	verb   string // "evict"
	gerund string // "evicting"
	object string // what it acts on: "a leader"
}{
	actionEvict:    {"evict", "evicting", "a leader"},
	actionResign:   {"resign", "resigning", "a leader"},
	actionHandover: {"hand over", "handing over", "a scope"},
}

// verb names the action in messages ("evict", "resign", "hand over").
func (k actionKind) verb() string { return actionWords[k].verb }

// gerund is the verb's -ing form ("evicting", "resigning", "handing over").
func (k actionKind) gerund() string { return actionWords[k].gerund }

// handoverVia is how a handover asked from the dashboard is audited.
const handoverVia = "pgleader top"

// confirmation is an open y/N question about an action on a scope's leader
// (for a handover, on the scope, which may have none).
type confirmation struct {
	kind          actionKind
	scope, leader string
	pid           int
	epoch         int64
	// target is the node a handover goes to, and its priority.
	target   string
	priority int
}

// ask opens the y/N question for an action on the selected scope's leader or,
// for a handover, on the selected scope: a handover names its target, the best
// eligible follower in the snapshot, and is refused without asking when there
// is none.
func (m *Model) ask(kind actionKind) tea.Cmd {
	if m.opts.Actions == nil {
		m.setStatus(fmt.Sprintf("read-only: start with --allow-actions to %s %s", kind.verb(), actionWords[kind].object), toneWarn)
		return nil
	}
	scope := m.selectedScope()
	if scope == "" || m.snap == nil {
		m.setStatus("no scope selected", toneWarn)
		return nil
	}
	sc, ok := findScope(m.snap, scope)
	if !ok || (sc.Leader == "" && kind != actionHandover) {
		m.setStatus(fmt.Sprintf("scope %s has no leader to %s", keyLabel(scope), kind.verb()), toneWarn)
		return nil
	}
	c := confirmation{kind: kind, scope: scope, leader: sc.Leader, pid: sc.HolderPID, epoch: sc.Epoch}
	if kind == actionHandover {
		to, ok := m.handoverTarget(sc)
		if !ok {
			m.setStatus(fmt.Sprintf("not handing %s over: no follower is eligible (live, of priority above 0)", keyLabel(scope)), toneWarn)
			return nil
		}
		c.target, c.priority = to.id, to.node.Priority
	}
	m.openOverlay(overlayConfirm)
	m.mode.confirm = c
	return nil
}

// handoverTarget is the follower a handover of sc goes to: the first of
// rankedFollowers (highest priority, then node id), if it is eligible.
func (m *Model) handoverTarget(sc collector.Scope) (follower, bool) {
	fs := m.rankedFollowers(sc.Database, sc.Followers)
	if len(fs) == 0 || !fs[0].known || !fs[0].node.Eligible() {
		return follower{}, false
	}
	return fs[0], true
}

// stillEligible reports whether to is still an eligible follower of the scope in s.
func stillEligible(s *collector.Snapshot, scope, to string) bool {
	sc, ok := findScope(s, scope)
	if !ok || !slices.Contains(sc.Followers, to) {
		return false
	}
	n, ok := findNode(s, keyOf(sc.Database, to))
	return ok && n.Eligible()
}

// runAction runs the action the operator confirmed (confirmKey).
func (m *Model) runAction(c confirmation) tea.Cmd {
	// Every action acts on whoever leads the scope when it runs: refuse if that
	// is no longer the leader the operator agreed to act on (or, for a
	// handover, the target is no longer eligible).
	latest := m.snap
	if m.pending != nil {
		latest = m.pending
	}
	if sc, ok := findScope(latest, c.scope); !ok || sc.Leader != c.leader {
		now := "nobody"
		if ok && sc.Leader != "" {
			now = sc.Leader
		}
		m.setStatus(fmt.Sprintf("not %s: %s is now led by %s, not %s; press %s again",
			c.kind.gerund(), c.scope, now, cmp.Or(c.leader, "nobody"), m.keys.action(c.kind).Help().Key), toneWarn)
		return nil
	}
	if c.kind == actionHandover && !stillEligible(latest, c.scope, c.target) {
		m.setStatus(fmt.Sprintf("not handing over: %s is no longer an eligible follower of %s; press %s again",
			c.target, c.scope, m.keys.action(c.kind).Help().Key), toneWarn)
		return nil
	}
	actions, scope, err := m.actionsFor(c.scope)
	if err != nil {
		m.setStatus(fmt.Sprintf("not %s %s: %v", c.kind.gerund(), keyLabel(c.scope), err), toneBad)
		return nil
	}
	ctx := m.ctx
	c.scope = keyLabel(c.scope) // the messages say billing/scope-1; the action gets the name
	if c.kind == actionHandover {
		if c.leader == "" {
			m.setStatus(fmt.Sprintf("reserving %s for %s…", c.scope, c.target), toneWarn)
		} else {
			m.setStatus(fmt.Sprintf("asking %s to hand %s over to %s…", c.leader, c.scope, c.target), toneWarn)
		}
		return func() tea.Msg {
			ctx, cancel := context.WithTimeout(ctx, actionTimeout)
			defer cancel()
			err := actions.Handover(ctx, scope, c.target, handoverVia)
			detail := fmt.Sprintf("handed %s over to %s (was led by %s at epoch %d)", c.scope, c.target, c.leader, c.epoch)
			switch {
			case err != nil:
				detail = fmt.Sprintf("hand %s over to %s", c.scope, c.target)
			case c.leader == "":
				detail = fmt.Sprintf("handed %s, which had no leader, to %s", c.scope, c.target)
			}
			return localEventMsg{kind: eventAction, scope: c.scope, detail: detail, err: err}
		}
	}
	if c.kind == actionResign {
		m.setStatus(fmt.Sprintf("asking %s to resign %s…", c.leader, c.scope), toneWarn)
		return func() tea.Msg {
			ctx, cancel := context.WithTimeout(ctx, actionTimeout)
			defer cancel()
			err := actions.Resign(ctx, scope, "operator resign from pgleader top")
			detail := fmt.Sprintf("asked %s, leader of %s (epoch %d), to resign: it hands over now (at its next heartbeat if its doorbell cannot ring)", c.leader, c.scope, c.epoch)
			if err != nil {
				detail = fmt.Sprintf("resign %s of %s", c.leader, c.scope)
			}
			return localEventMsg{kind: eventAction, scope: c.scope, detail: detail, err: err}
		}
	}
	m.setStatus(fmt.Sprintf("evicting %s of %s…", c.leader, c.scope), toneWarn)
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, actionTimeout)
		defer cancel()
		err := actions.Evict(ctx, scope, "operator eviction from pgleader top")
		detail := fmt.Sprintf("evicted %s, leader of %s (backend pid %d)", c.leader, c.scope, c.pid)
		if err != nil {
			detail = fmt.Sprintf("evict %s of %s", c.leader, c.scope)
		}
		return localEventMsg{kind: eventAction, scope: c.scope, detail: detail, err: err}
	}
}

// runFault runs the demo fault bound to b on the selected scope.
func (m *Model) runFault(b key.Binding) tea.Cmd {
	_, scope := splitKey(m.selectedScope()) // the demo's faults act on one database
	if scope == "" {
		m.setStatus("no scope selected for the fault", toneWarn)
		return nil
	}
	k, help := b.Keys()[0], b.Help().Desc
	m.setStatus(fmt.Sprintf("%s on %s…", help, scope), toneWarn)
	faults, ctx := m.opts.Faults, m.ctx
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, actionTimeout)
		defer cancel()
		out, err := faults.Do(ctx, k, scope)
		if out == "" {
			out = help
		}
		return localEventMsg{kind: eventFault, scope: scope, detail: out, err: err}
	}
}

// confirmWrap is the width the confirmation's explanation is wrapped at.
const confirmWrap = 58

// wrapWords wraps s into lines of at most w columns at spaces only, so that a
// node name keeps its hyphens on one line (ansi.Wrap breaks after a hyphen); a
// word wider than w gets a line of its own.
func wrapWords(s string, w int) []string {
	var lines []string
	var line strings.Builder
	for _, word := range strings.Fields(s) {
		if line.Len() > 0 && textWidth(line.String())+1+textWidth(word) > w {
			lines = append(lines, line.String())
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(word)
	}
	if line.Len() > 0 {
		lines = append(lines, line.String())
	}
	return lines
}

// confirmBox renders the open y/N question: which action, on whom, and what it
// does.
func (m *Model) confirmBox(w int) string {
	c := m.mode.confirm
	c.scope, c.leader = termsafe.String(keyLabel(c.scope)), termsafe.String(c.leader) // shown, not acted on
	c.target = termsafe.String(c.target)
	var title string
	var body []string
	wrap := func(s string) []string { return wrapWords(s, min(confirmWrap, max(20, w-4))) }
	switch c.kind {
	case actionHandover:
		title = "Hand " + c.scope + " over to " + c.target + "?"
		why := fmt.Sprintf("%s is its best eligible follower: live, priority %d (highest first, then by node id).", c.target, c.priority)
		if c.leader == "" {
			body = wrap(fmt.Sprintf("%s has no leader: reserves it for %s, which claims it under a new epoch. %s", c.scope, c.target, why))
		} else {
			body = wrap(fmt.Sprintf("Asks %s through the database to hand %s to %s: it drains in-flight work, releases the "+
				"term as handed_over, and the scope, reserved for %s, goes to it under a new epoch. %s", c.leader, c.scope, c.target, c.target, why))
		}
		body = append(body, wrap(fmt.Sprintf("If %s does not lead in time, the request is withdrawn.", c.target))...)
	case actionResign:
		title = "Resign the leader of " + c.scope + "?"
		body = wrap(fmt.Sprintf("Asks %s through the database to hand %s over: it drains in-flight work "+
			"(up to its drain timeout), releases the lock, and a follower takes over under a new epoch, usually "+
			"within one heartbeat interval.", c.leader, c.scope))
	default:
		pid := "unknown backend pid"
		if c.pid > 0 {
			pid = fmt.Sprintf("backend pid %d", c.pid)
		}
		title = "Evict the leader of " + c.scope + "?"
		body = []string{
			fmt.Sprintf("Terminates %s's leadership session (%s).", c.leader, pid),
			"A follower takes over under a new epoch; the",
			"evicted node's fenced writes are refused.",
		}
	}
	lines := append([]string{m.look.title.Render(title), ""}, body...)
	yes, no := m.keys.Confirm.Help().Key, m.keys.Decline.Help().Key
	lines = append(lines, "", m.look.key.Render(yes)+" "+c.kind.verb()+"    "+m.look.key.Render("any other key")+" cancel   ["+yes+"/"+no+"]")
	return m.look.modal.MaxWidth(w).Render(strings.Join(lines, "\n"))
}
