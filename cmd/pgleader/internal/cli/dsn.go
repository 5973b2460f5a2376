package cli

import (
	"errors"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Target is the database a command talks to.
type Target struct {
	// DSN is the connection string as resolved, for APIs that take a string
	// (election.Config.DSN). Empty when only the PG* variables apply.
	DSN string
	// Source names where DSN came from, for error messages: "--dsn",
	// "DATABASE_URL" or "PG* environment variables".
	Source string
	// Config is DSN parsed by pgx (which also applies PG* variables and
	// ~/.pgpass).
	Config *pgx.ConnConfig
}

// ResolveDSN returns the database a command connects to: the --dsn value when it
// is set, else the DATABASE_URL environment variable, else what the standard PG*
// variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGSSLMODE, …) say. A
// string pgx cannot parse is bad input; nothing is connected here.
func ResolveDSN(flag string) (Target, error) {
	t := Target{DSN: flag, Source: "--dsn"}
	if t.DSN == "" {
		if env := os.Getenv("DATABASE_URL"); env != "" {
			t.DSN, t.Source = env, "DATABASE_URL"
		} else {
			t.Source = "PG* environment variables"
		}
	}
	if err := checkURL(t.DSN); err != nil {
		return Target{}, BadInput("invalid connection string from %s: %v", t.Source, err)
	}
	cfg, err := pgx.ParseConfig(t.DSN)
	if err != nil {
		return Target{}, BadInput("invalid connection string from %s: %s; fix it (URL form postgres://user@host:5432/dbname?sslmode=require, or host=… port=… user=… dbname=…)%s",
			t.Source, parseReason(err, t.DSN), urlHint(t.DSN))
	}
	t.Config = cfg
	return t, nil
}

// PasswordWarning is the one-line warning for a connection string given on the
// command line (flag names the flag) that holds a password: every user of the
// host can read a process's arguments (ps, /proc/PID/cmdline). Empty when dsn
// holds none. The warning never quotes the password.
func PasswordWarning(flag, dsn string) string {
	for _, pw := range dsnPasswords(dsn) {
		if pw != "" {
			return "pgleader: warning: " + flag + " holds a password, which other users of this host can read in the process list (ps); leave it out of " +
				flag + " and put it in ~/.pgpass (or the file PGPASSFILE names), in PGPASSWORD, or pass the whole connection string in DATABASE_URL"
		}
	}
	return ""
}

// isURL reports whether dsn is in the URL form.
func isURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// urlHint is the advice of a URL that does not parse: what usually breaks one is
// a password character that ends the user information early.
func urlHint(dsn string) string {
	if !isURL(dsn) {
		return ""
	}
	return "; in the URL form, percent-encode '@', '/', '%' and spaces in the user name and password (%40, %2F, %25, %20)"
}

// checkURL refuses a URL whose user information is ambiguous: like libpq, pgx
// ends it at the first '@' or '/', so a password holding an unencoded '@' or '/'
// leaves its tail in the host or the path — a wrong host that error messages
// print, and with it part of the password. One '@', before any '/', is all the
// part before the query may hold.
func checkURL(dsn string) error {
	if !isURL(dsn) {
		return nil
	}
	rest := dsn[strings.Index(dsn, "://")+3:]
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest = rest[:q]
	}
	at := strings.IndexByte(rest, '@')
	if at < 0 {
		return nil
	}
	slash := strings.IndexByte(rest, '/')
	if strings.Count(rest, "@") > 1 || (slash >= 0 && slash < at) {
		return errors.New("the user name and password of the URL end at its first '@' or '/', and another '@' follows: percent-encode '@' as %40 and '/' as %2F in the password (and in the user and database names)")
	}
	return nil
}

// quotedText is a quoted fragment of an error message: pgx and net/url quote
// the parts of the connection string they could not parse.
var quotedText = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|`[^`]*`")

// parseReason is why pgx could not parse dsn, without any part of dsn. pgx masks
// the password in the string it echoes only as far as it can tell where a
// malformed string's password ends (it cannot when the password holds an
// unencoded '@' or an escaped quote), so neither that echo nor any quoted
// fragment of the reason is kept, and the password is masked once more.
func parseReason(err error, dsn string) string {
	text := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		bare := *pe
		bare.ConnString = ""
		text = strings.TrimPrefix(bare.Error(), "cannot parse ``: ")
	}
	return redact(quotedText.ReplaceAllString(text, "…"), dsnPasswords(dsn))
}

// kvPasswordValue is the value of a password or sslpassword keyword: quoted
// (with backslash escapes) or up to the next space.
var kvPasswordValue = regexp.MustCompile(`(?:^|\s)(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s\\]|\\.)+)`)

// dsnPasswords returns what a reader of dsn would take for its passwords, as
// written: the user information after the first ':' up to the last '@' of a URL
// (more than pgx reads when the password holds an '@'), and the values of
// password keywords.
func dsnPasswords(dsn string) []string {
	var out []string
	if isURL(dsn) {
		rest := dsn[strings.Index(dsn, "://")+3:]
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok && pw != "" {
				out = append(out, pw)
			}
		}
	}
	for _, m := range kvPasswordValue.FindAllStringSubmatch(dsn, -1) {
		v := m[1]
		out = append(out, v, unescapeKV(strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")))
	}
	return out
}

// unescapeKV undoes the backslash escapes of a keyword/value connection string.
func unescapeKV(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
