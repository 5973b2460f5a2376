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
