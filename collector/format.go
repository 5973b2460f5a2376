package collector

import (
	"cmp"
	"fmt"
	"strings"
)

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

// splitDatabase splits a Health.Database ("app @ db1:5432") into the database's
// name and its server; a value without a server is the name, server "?".
func splitDatabase(d string) (name, server string) {
	if n, srv, ok := strings.Cut(d, " @ "); ok {
		return n, srv
	}
	return cmp.Or(d, "?"), "?"
}

// shortCause is the gist of a connection or read error, for the front of a
// collector_down line: the kind of failure PostgreSQL or the network reported,
// else the error's last clause, cut to 60 characters.
func shortCause(err string) string {
	e := strings.ToLower(err)
	for _, k := range []struct{ has, say string }{
		{"connection refused", "connection refused"},
		{"no such host", "no such host"},
		{"no route to host", "no route to host"},
		{"network is unreachable", "network unreachable"},
		{"the database system is starting up", "starting up"},
		{"the database system is shutting down", "shutting down"},
		{"the database system is in recovery mode", "in recovery"},
		{"terminating connection due to administrator command", "shut down (admin)"},
		{"too many clients", "too many clients"},
		{"password authentication failed", "password refused"},
		{"timeout", "timed out"},
		{"deadline exceeded", "timed out"},
		{"no read has finished", "reads not finishing"},
		{"connection reset", "connection reset"},
		{"unexpected eof", "connection lost"},
		{"broken pipe", "connection lost"},
	} {
		if strings.Contains(e, k.has) {
			return k.say
		}
	}
	s := oneLine(err)
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		s = s[i+2:]
	}
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return cmp.Or(s, "not read")
}
