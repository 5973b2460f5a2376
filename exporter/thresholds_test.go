package exporter_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/pgleader/pgleader/collector"
)

// ruleExprs returns the expr of each alert of the rules file (exprs are kept on
// one line there, which this relies on).
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("rules", "pgleader.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^\s*- alert: (\w+)\s*\n\s*expr: (.+)$`)
	exprs := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(data), -1) {
		exprs[m[1]] = strings.TrimSpace(m[2])
	}
	if len(exprs) == 0 {
		t.Fatal("no alert found in the rules file")
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
		{"PgleaderFlapping", fmt.Sprintf("[%v]", model.Duration(def.FlapWindow)), "FlapWindow"},
		{"PgleaderFlapping", fmt.Sprintf(" > %d", def.FlapMax), "FlapMax"},
		{"PgleaderFencedWriteRejected", fmt.Sprintf("[%v]", model.Duration(def.FenceAlertFor)), "FenceAlertFor"},
		{"PgleaderLockPressure", fmt.Sprintf(" > %g", def.LockPressure), "LockPressure"},
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
	} {
		if !sections[string(kind)] {
			t.Errorf("collector alert %s has no section in docs/runbooks.md", kind)
		}
	}
}
