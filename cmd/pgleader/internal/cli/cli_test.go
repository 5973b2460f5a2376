package cli

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/election"
)

func TestResolveDSN(t *testing.T) {
	t.Run("FlagFirst", func(t *testing.T) {
		t.Setenv("DATABASE_URL", "postgres://env@envhost/envdb")
		tg, err := ResolveDSN("postgres://flag@flaghost:6000/flagdb")
		if err != nil || tg.Source != "--dsn" || tg.Config.Host != "flaghost" || tg.Config.Port != 6000 {
			t.Fatalf("%+v, %v", tg, err)
		}
	})
	t.Run("DatabaseURL", func(t *testing.T) {
		t.Setenv("DATABASE_URL", "postgres://env@envhost/envdb")
		tg, err := ResolveDSN("")
		if err != nil || tg.Source != "DATABASE_URL" || tg.Config.Host != "envhost" || tg.DSN != "postgres://env@envhost/envdb" {
			t.Fatalf("%+v, %v", tg, err)
		}
	})
	t.Run("PGVariables", func(t *testing.T) {
		t.Setenv("DATABASE_URL", "")
		t.Setenv("PGHOST", "pghost")
		t.Setenv("PGPORT", "6543")
		t.Setenv("PGDATABASE", "pgdb")
		tg, err := ResolveDSN("")
		if err != nil || tg.Source != "PG* environment variables" || tg.Config.Host != "pghost" ||
			tg.Config.Port != 6543 || tg.Config.Database != "pgdb" {
			t.Fatalf("%+v, %v", tg, err)
		}
		if tg.DSN != "" {
			t.Fatalf("DSN %q, want empty (election reads the PG* variables itself)", tg.DSN)
		}
	})
	t.Run("Malformed", func(t *testing.T) {
		_, err := ResolveDSN("postgres://u:s3cr3t@bad host:x")
		if ExitCode(err) != ExitBadInput {
			t.Fatalf("exit code %d for %v", ExitCode(err), err)
		}
		if msg := Message(err); strings.Contains(msg, "s3cr3t") || !strings.Contains(msg, "from --dsn") {
			t.Fatalf("message %q", msg)
		}
	})
}

// TestRedactDSNParseErrors: a connection string that does not parse (or whose
// password ends the user information early) is bad input, and its message shows
// no part of the password: not through pgx's echo of the string, not through a
// fragment its reason quotes, not through a host or database name cut out of the
// password.
func TestRedactDSNParseErrors(t *testing.T) {
	words := []string{"hunter", "kiwi", "mango", "papaya"}
	tests := []struct {
		name, dsn string
		want      string // substring of the message
	}{
		{"URLAt", "postgres://u:hunter@kiwi@127.0.0.1:1/db", "%40"},
		{"URLAtTwice", "postgres://u:hunter@kiwi@mango@127.0.0.1:1/db?sslmode=disable", "%40"},
		{"URLSlash", "postgres://u:hunter/kiwi@127.0.0.1:1/db", "%2F"},
		{"URLDigitsSlash", "postgres://u:5432/kiwi@127.0.0.1:1/db", "%2F"},
		{"URLEverything", "postgres://u:hunter@kiwi:mango/papaya%41 x@127.0.0.1:1/db", "%40"},
		{"URLSpace", "postgres://u:hunter kiwi@127.0.0.1:1/db", "%20"},
		{"URLBadPercent", "postgres://u:hunter%ZZkiwi@127.0.0.1:1/db", "percent"},
		{"URLBadPort", "postgres://u:hunterkiwi@127.0.0.1:x/db", "invalid port"},
		{"KVQuoted", "host=127.0.0.1 port=x user=u password='hunter kiwi@mango'", "invalid port"},
		{"KVEscapedQuote", `host=127.0.0.1 port=1 password='hunter\' kiwi' connect_timeout=x`, "connect_timeout"},
		{"KVEscapedSpace", `host=127.0.0.1 port=1 password=hunter\ kiwi connect_timeout=x`, "connect_timeout"},
		{"KVUnterminated", "host=127.0.0.1 password='hunter kiwi", "fix it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ResolveDSN(tt.dsn)
			if ExitCode(err) != ExitBadInput {
				t.Fatalf("ResolveDSN(%q): exit code %d for %v", tt.dsn, ExitCode(err), err)
			}
			msg := Message(err)
			for _, w := range words {
				if strings.Contains(msg, w) {
					t.Errorf("message shows %q of the password: %s", w, msg)
				}
			}
			if !strings.HasPrefix(msg, "pgleader: invalid connection string from --dsn: ") || !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("message %q, want one line containing %q", msg, tt.want)
			}
		})
	}
	t.Run("PercentEncodedAccepted", func(t *testing.T) {
		tg, err := ResolveDSN("postgres://u:hunter%40kiwi%2Fmango@127.0.0.1:1/db?application_name=a@b")
		if err != nil || tg.Config.Password != "hunter@kiwi/mango" || tg.Config.Host != "127.0.0.1" {
			t.Fatalf("%+v, %v", tg.Config, err)
		}
	})
}

func TestMessageAndExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code int
		want string // regexp the message must match
	}{
		{"Input", BadInput("invalid --x: use y"), ExitBadInput, `^pgleader: invalid --x: use y$`},
		{"Config", fmt.Errorf("new: %w", &election.ConfigError{Field: "TrustWindow", Rule: "must exceed I + T"}), ExitBadInput,
			`^pgleader: invalid configuration: TrustWindow: must exceed I \+ T \(flag --trust-window\)$`},
		{"ConfigNoFlag", &election.ConfigError{Field: "LockKeys", Rule: "r"}, ExitBadInput, `^pgleader: invalid configuration: LockKeys: r$`},
		{"Unreachable", fmt.Errorf("%w: cannot connect to db:5432: refused\ndb:5432: refused", election.ErrUnreachable), ExitUnreachable,
			`^pgleader: database unreachable: cannot connect to db:5432: refused; check --dsn`},
		// A server that answered with a refusal the user can fix is bad input,
		// not a database that cannot be read.
		{"WrongPassword", fmt.Errorf("%w: %w", election.ErrUnreachable, &pgconn.PgError{Code: "28P01", Message: "password authentication failed"}), ExitBadInput, `password authentication failed`},
		{"NoSuchDatabase", fmt.Errorf("%w: %w", election.ErrUnreachable, &pgconn.PgError{Code: "3D000", Message: "database \"x\" does not exist"}), ExitBadInput, `does not exist`},
		{"ShuttingDown", fmt.Errorf("read: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}), ExitUnreachable, `terminating connection`},
		{"ConnectionException", fmt.Errorf("read: %w", &pgconn.PgError{Code: "08006", Message: "connection failure"}), ExitUnreachable, `connection failure`},
		{"Unsupported", fmt.Errorf("%w: server is 13.4", election.ErrUnsupportedServer), ExitBadInput,
			`^pgleader: unsupported PostgreSQL version: server is 13\.4; point --dsn at PostgreSQL 14 or newer$`},
		{"SchemaMissingWithFix", fmt.Errorf("%w: no schema: run `pgleader migrate`", election.ErrSchemaMissing), ExitBadInput,
			"^pgleader: schema missing or outdated: no schema: run `pgleader migrate`$"},
		{"SchemaMissingBare", election.ErrSchemaMissing, ExitBadInput, "run `pgleader migrate`$"},
		{"Runtime", errors.New("write events file: disk full"), ExitFailure, `^pgleader: write events file: disk full$`},
		{"RuntimePrefixed", fmt.Errorf("%w (epoch 3)", election.ErrNotLeader), ExitFailure, `^pgleader: not the leader \(epoch 3\)$`},
		{"EscapesControls", errors.New("node n\x1b[2J\u202eid\x7f failed"), ExitFailure, `^pgleader: node n\\x1b\[2J\\u202eid\\x7f failed$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.code {
				t.Errorf("ExitCode = %d, want %d", got, tt.code)
			}
			if msg := Message(tt.err); !regexp.MustCompile(tt.want).MatchString(msg) || strings.Contains(msg, "\n") {
				t.Errorf("Message = %q, want match %q", msg, tt.want)
			}
		})
	}
	if ExitCode(nil) != ExitOK {
		t.Error("ExitCode(nil) != 0")
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, secret string }{
		{"cannot parse `postgres://u:hunter22@h/db`", ""},
		{"cannot parse `postgresql://u:hunter22@h/db`", ""},
		{"cannot parse `host=h password=hunter22 port=x`", ""},
		{"cannot parse `host=h password='hunter 22' port=x`", ""},
		{`cannot parse ` + "`host=h password='hunter\\' 22' port=x`", ""},
		{`cannot parse ` + "`host=h password=hunter\\ 22 port=x`", ""},
		{"cannot parse `postgres://u:hunter@22@h/db`", ""},
		{"auth failed for hunter22", "hunter22"},
	}
	for _, tt := range tests {
		got := Message(errors.New(tt.in), tt.secret)
		if strings.Contains(got, "hunter") {
			t.Errorf("Message(%q) = %q: shows the password", tt.in, got)
		}
	}
	if got := Message(errors.New("user=ab is fine"), "ab"); got != "pgleader: user=ab is fine" {
		t.Errorf("a short secret mangled the message: %q", got)
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "json", "debug")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hello", "scope", "a")
	if !strings.HasPrefix(buf.String(), "{") || !strings.Contains(buf.String(), `"scope":"a"`) {
		t.Errorf("json log line = %q", buf.String())
	}
	buf.Reset()
	log.Info("x", "node", "n\x1b[2J\u202e\u0085\x7f")
	if line := buf.String(); !strings.Contains(line, `"node":"n\u001b[2J\u202e\u0085\u007f"`) {
		t.Errorf("json log line = %q: a name must not reach the terminal raw", line)
	}
	buf.Reset()
	log, _ = NewLogger(&buf, "text", "info")
	log.Info("x", "node", "n\x1b[2J\u202e\u0085\x7f")
	if line := buf.String(); !strings.Contains(line, `node="n\x1b[2J\u202e\u0085\x7f"`) {
		t.Errorf("text log line = %q: a name must not reach the terminal raw", line)
	}
	buf.Reset()
	log, _ = NewLogger(&buf, "text", "warn")
	log.Info("hidden")
	if buf.Len() != 0 {
		t.Errorf("info line at level warn: %q", buf.String())
	}
	for _, bad := range [][2]string{{"xml", "info"}, {"text", "loud"}} {
		if _, err := NewLogger(&buf, bad[0], bad[1]); ExitCode(err) != ExitBadInput {
			t.Errorf("NewLogger(%q, %q): %v", bad[0], bad[1], err)
		}
	}
}

func TestOneLineKeepsCobraSuggestion(t *testing.T) {
	got := oneLine("unknown command \"nodee\" for \"pgleader\"\n\nDid you mean this?\n\tnode\n; see `pgleader --help`")
	want := "unknown command \"nodee\" for \"pgleader\"; Did you mean this?; node; see `pgleader --help`"
	if got != want {
		t.Fatalf("oneLine = %q, want %q", got, want)
	}
}
