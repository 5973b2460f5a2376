package exporter_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/pgleader/pgleader/collector"
)

// rule is what the tests check of an alerting rule.
type rule struct {
	Alert string `yaml:"alert"`
	Expr  string `yaml:"expr"`
	For   string `yaml:"for"`
}

// rules returns the alerting rules of the rules file, by name.
func rules(t *testing.T) map[string]rule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("rules", "pgleader.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	out := map[string]rule{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no alert found in the rules file")
	}
	return out
}

// ruleExprs returns the expr of each alert of the rules file.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	for name, r := range rules(t) {
		exprs[name] = strings.TrimSpace(r.Expr)
	}
	return exprs
}

// containsFigure reports whether expr contains want not followed by more of a
// number (so "> 6" does not match "> 60").
func containsFigure(expr, want string) bool {
	for i := strings.Index(expr, want); i >= 0; {
		rest := expr[i+len(want):]
		if rest == "" || !strings.ContainsAny(rest[:1], "0123456789.") {
			return true
		}
		j := strings.Index(rest, want)
		if j < 0 {
			return false
		}
		i += len(want) + j
	}
	return false
}

// TestRuleThresholdsMatchCollector keeps the alert rules on the collector's
// default thresholds, so that Prometheus and the dashboard's banner agree.
func TestRuleThresholdsMatchCollector(t *testing.T) {
	t.Parallel()
	def := collector.DefaultConfig()
	exprs := ruleExprs(t)
	for _, c := range []struct {
		alert, want, field string
	}{
		{"PgleaderNoLeader", fmt.Sprintf("pgleader_scope_leaderless_seconds >= %g ", def.NoLeaderAfter.Seconds()), "NoLeaderAfter"},
		{"PgleaderFencedWriteRejected", fmt.Sprintf("[%v]", model.Duration(def.FenceAlertFor)), "FenceAlertFor"},
		{"PgleaderLockPressure", fmt.Sprintf("pgleader_lock_table_used / pgleader_lock_table_capacity > %g", def.LockPressure), "LockPressure"},
		{"PgleaderNotifyQueueFilling", fmt.Sprintf("pgleader_notify_queue_usage_ratio > %g", def.NotifyQueuePressure), "NotifyQueuePressure"},
	} {
		expr, ok := exprs[c.alert]
		if !ok {
			t.Errorf("alert %s missing from the rules", c.alert)
			continue
		}
		if !containsFigure(expr, c.want) {
			t.Errorf("%s: expr %q does not contain %q (collector.DefaultConfig().%s)", c.alert, expr, c.want, c.field)
		}
	}
}

// TestRulesAgreeWithCollector: a rule whose check needs more than the gauges
// carry reads the collector's own alert, so that it fires exactly when
// pgleader status and pgleader top show it; and a rule that recomputes a check
// the collector raises at once (lock pressure, notify queue) does not wait
// (no for:), or Prometheus would stay silent while status shows the alert.
func TestRulesAgreeWithCollector(t *testing.T) {
	t.Parallel()
	rs := rules(t)
	for name, kind := range map[string]collector.AlertKind{
		"PgleaderFlapping":      collector.AlertFlapping,
		"PgleaderSlowFailover":  collector.AlertSlowFailover,
		"PgleaderNoFollower":    collector.AlertNoFollower,
		"PgleaderUnboundLeader": collector.AlertUnboundLeader,
	} {
		want := fmt.Sprintf(`pgleader_alert{alert="%s"} == 1`, kind)
		if got := strings.TrimSpace(rs[name].Expr); got != want {
			t.Errorf("%s: expr %q, want %q (the collector's %s check)", name, got, want, kind)
		}
	}
	for _, name := range []string{"PgleaderLockPressure", "PgleaderNotifyQueueFilling", "PgleaderSlowFailover", "PgleaderFlapping", "PgleaderUnboundLeader"} {
		if r := rs[name]; r.For != "" {
			t.Errorf("%s waits %s; the collector raises its check at once", name, r.For)
		}
	}
}

// TestRunbookAnchors checks that every runbook_url of the rules and every
// collector alert kind has its section in docs/runbooks.md.
func TestRunbookAnchors(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(doc), -1) {
		sections[m[1]] = true
	}
	rules, err := os.ReadFile(filepath.Join("rules", "pgleader.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	const base = "https://github.com/pgleader/pgleader/blob/main/docs/runbooks.md#"
	urls := regexp.MustCompile(`runbook_url: "([^"]*)"`).FindAllStringSubmatch(string(rules), -1)
	if len(urls) != len(ruleExprs(t)) {
		t.Errorf("%d runbook_url annotations for %d alerts", len(urls), len(ruleExprs(t)))
	}
	for _, m := range urls {
		anchor, ok := strings.CutPrefix(m[1], base)
		if !ok || !sections[anchor] {
			t.Errorf("runbook_url %s: no section %q in docs/runbooks.md", m[1], anchor)
		}
	}
	for _, kind := range []collector.AlertKind{
		collector.AlertNoLeader, collector.AlertSplitBrain, collector.AlertStaleLeader,
		collector.AlertStaleNode, collector.AlertFlapping, collector.AlertFenceRejected,
		collector.AlertLockPressure, collector.AlertCollectorDown, collector.AlertInterference,
		collector.AlertNoFollower, collector.AlertNotifyQueue, collector.AlertUnboundLeader,
		collector.AlertSlowFailover,
	} {
		if !sections[string(kind)] {
			t.Errorf("collector alert %s has no section in docs/runbooks.md", kind)
		}
	}
}

// TestDocListsEveryMetric: the package doc's metric list (the contract of the
// names, DESIGN §5) has every metric the exporter emits, and no other.
func TestDocListsEveryMetric(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^//\t(pgleader_[a-z_]+)`).FindAllStringSubmatch(string(doc), -1) {
		listed[m[1]] = true
	}
	// Every family a scrape can have: a cluster with alerts, a supervised
	// node, a permanent slot, a timeline.
	snap := synthetic(5, 4)
	snap.Alerts = []collector.Alert{{Kind: collector.AlertStaleNode, Severity: collector.SeverityWarning, Node: snap.Nodes[3].ID}}
	fams, err := newRegistry(t, snap, t0).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range fams {
		name := mf.GetName()
		if !listed[name] {
			t.Errorf("%s is not in the package doc's metric list", name)
		}
		delete(listed, name)
	}
	for name := range listed {
		t.Errorf("the package doc lists %s, which the exporter does not emit", name)
	}
}
