package collector

import (
	"cmp"
	"fmt"
	"strings"
)

func runbook(k AlertKind) string { return "docs/runbooks.md#" + string(k) }

// via formats what an audit row's caller said it is, after the role it was.
func via(v string) string {
	if v == "" {
		return ""
	}
	return " via " + v
}

func pids(ps []int) string {
	if len(ps) == 1 {
		return fmt.Sprint(ps[0])
	}
	return "[" + pidList(ps) + "]"
}

func pidList(ps []int) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return cmp.Or(s, "unknown error")
}

// shellQuote quotes s for a POSIX shell: one argument, nothing expanded.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// pqLiteral quotes s as an SQL string literal (quote_literal's rules).
func pqLiteral(s string) string {
	if strings.Contains(s, `\`) {
		return "E'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
