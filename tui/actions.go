package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/pgleader/pgleader/internal/termsafe"
)

// actionTimeout bounds one operator action or fault.
const actionTimeout = 15 * time.Second

// actionKind is the operator action a confirmation asks about.
type actionKind int

const (
	actionEvict  actionKind = iota // terminate the leader's session (Actions.Evict)
	actionResign                   // a graceful resign through the database (Actions.Resign)
)

// verb names the action in messages ("evict", "resign").
func (k actionKind) verb() string {
	if k == actionResign {
		return "resign"
	}
	return "evict"
}

// gerund is the verb's -ing form ("evicting", "resigning").
func (k actionKind) gerund() string {
	if k == actionResign {
		return "resigning"
	}
	return "evicting"
}

// confirmation is an open y/N question about an action on a scope's leader.
type confirmation struct {
	kind          actionKind
	scope, leader string
	pid           int
	epoch         int64
}

// ask opens the y/N question for an action on the selected scope's leader.
func (m *Model) ask(kind actionKind) tea.Cmd {
	if m.opts.Actions == nil {
		m.setStatus(fmt.Sprintf("read-only: start with --allow-actions to %s a leader", kind.verb()), toneWarn)
		return nil
	}
	scope := m.selectedScope()
	if scope == "" || m.snap == nil {
		m.setStatus("no scope selected", toneWarn)
		return nil
	}
	sc, ok := m.snap.Scope(scope)
	if !ok || sc.Leader == "" {
		m.setStatus(fmt.Sprintf("scope %s has no leader to %s", scope, kind.verb()), toneWarn)
		return nil
	}
	m.confirm = &confirmation{kind: kind, scope: scope, leader: sc.Leader, pid: sc.HolderPID, epoch: sc.Epoch}
	return nil
}

// answerConfirm runs the confirmed action on y (or Y); any other key cancels.
func (m *Model) answerConfirm(msg tea.KeyPressMsg) tea.Cmd {
	c := m.confirm
	m.confirm = nil
	if !key.Matches(msg, m.keys.Confirm) {
		m.setStatus(fmt.Sprintf("%s %s cancelled", c.kind.verb(), c.scope), toneNone)
		return nil
	}
	// Both actions act on whoever leads the scope when they run: refuse if that
	// is no longer the leader the operator agreed to act on.
	latest := m.snap
	if m.pending != nil {
		latest = m.pending
	}
	if sc, ok := latest.Scope(c.scope); !ok || sc.Leader != c.leader {
		now := "nobody"
		if ok && sc.Leader != "" {
			now = sc.Leader
		}
		m.setStatus(fmt.Sprintf("not %s: %s is now led by %s, not %s; press %s again",
			c.kind.gerund(), c.scope, now, c.leader, m.keys.action(c.kind).Help().Key), toneWarn)
		return nil
	}
	actions, ctx := m.opts.Actions, m.ctx
	if c.kind == actionResign {
		m.setStatus(fmt.Sprintf("asking %s to resign %s…", c.leader, c.scope), toneWarn)
		return func() tea.Msg {
			ctx, cancel := context.WithTimeout(ctx, actionTimeout)
			defer cancel()
			err := actions.Resign(ctx, c.scope, "operator resign from pgleader top")
			detail := fmt.Sprintf("asked %s, leader of %s (epoch %d), to resign: it hands over at its next heartbeat", c.leader, c.scope, c.epoch)
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
		err := actions.Evict(ctx, c.scope, "operator eviction from pgleader top")
		detail := fmt.Sprintf("evicted %s, leader of %s (backend pid %d)", c.leader, c.scope, c.pid)
		if err != nil {
			detail = fmt.Sprintf("evict %s of %s", c.leader, c.scope)
		}
		return localEventMsg{kind: eventAction, scope: c.scope, detail: detail, err: err}
	}
}

// runFault runs the demo fault bound to b on the selected scope.
func (m *Model) runFault(b key.Binding) tea.Cmd {
	scope := m.selectedScope()
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

// confirmBox renders the open y/N question: which action, on whom, and what it
// does.
func (m *Model) confirmBox(w int) string {
	c := *m.confirm
	c.scope, c.leader = termsafe.String(c.scope), termsafe.String(c.leader) // shown, not acted on
	var title string
	var body []string
	switch c.kind {
	case actionResign:
		title = "Resign the leader of " + c.scope + "?"
		body = strings.Split(ansi.Wrap(fmt.Sprintf("Asks %s through the database to hand %s over: it drains in-flight work "+
			"(up to its drain timeout), releases the lock, and a follower takes over under a new epoch, usually "+
			"within one heartbeat interval.", c.leader, c.scope), min(confirmWrap, max(20, w-4)), ""), "\n")
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
