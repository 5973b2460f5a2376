package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/termsafe"
	"github.com/pgleader/pgleader/migrations/migrate"
)

// Exit codes of every pgleader command.
const (
	ExitOK       = 0
	ExitFailure  = 1 // a runtime failure
	ExitBadInput = 2 // the user can fix it: flags, connection string, server, schema
	// ExitNoLeader: `pgleader status` found a scope without a leader.
	ExitNoLeader = 3
	// ExitSplitBrain: `pgleader status` found a split brain.
	ExitSplitBrain = 4
	// ExitDegraded: `pgleader status` found every scope led, but some with
	// alerts (DEGRADED): worth a look, not an outage.
	ExitDegraded = 5
	// ExitUnreachable: the database could not be read (not reached, refused,
	// timed out, shutting down or starting, the connection lost mid-read), the
	// same with --dsn and with --target; a fleet where some database cannot be
	// read (4 still wins). Bad configuration (a malformed DSN, a wrong password,
	// no such database, no schema) stays ExitBadInput: a health check tells a
	// wrong config from a down database.
	ExitUnreachable = 6
)

// StatusError ends a command with Code after it has printed what it had to say;
// Msg, when not empty, goes to stderr.
type StatusError struct {
	Code int
	Msg  string
}

// Error returns Msg.
func (e *StatusError) Error() string { return e.Msg }

// InputError is bad input found by the CLI itself (a flag value, a usage mistake).
// Its message names the problem and the fix.
type InputError struct{ msg string }

// Error returns the message.
func (e *InputError) Error() string { return e.msg }

// BadInput returns an *InputError with a formatted message.
func BadInput(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// ExitCode maps err to the process exit code: 0 for nil; ExitUnreachable when
// the database could not be read (Unreachable); ExitBadInput for bad input, an
// invalid configuration, a server that refuses the login or has no such
// database, an unsupported server, a missing or outdated schema and more scopes
// than the server's lock table holds; ExitFailure for anything else.
func ExitCode(err error) int {
	var in *InputError
	var st *StatusError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &st):
		return st.Code
	case errors.As(err, &in):
		return ExitBadInput
	case Unreachable(err):
		return ExitUnreachable
	case
		errors.Is(err, election.ErrInvalidConfig),
		errors.Is(err, election.ErrUnreachable),
		errors.Is(err, election.ErrUnsupportedServer),
		errors.Is(err, election.ErrSchemaMissing),
		errors.Is(err, election.ErrPermission),
		errors.Is(err, election.ErrTooManyScopes),
		errors.Is(err, election.ErrPooler),
		errors.Is(err, election.ErrModeConflict),
		errors.Is(err, migrate.ErrPooler):
		return ExitBadInput
	}
	return ExitFailure
}

// configFlags names the flag that sets each election.Config field.
var configFlags = map[string]string{
	"DSN":               "--dsn",
	"NodeID":            "--id",
	"Scopes":            "--scope",
	"HeartbeatInterval": "--heartbeat-interval",
	"HeartbeatTimeout":  "--heartbeat-timeout",
	"TrustWindow":       "--trust-window",
	"SessionLease":      "--session-lease",
	"DrainTimeout":      "--drain-timeout",
	"Priority":          "--priority",
	"Mode":              "--mode",
	"FailbackAfter":     "--preferred",
}

// Message returns the single line printed for err: what is wrong and how to fix
// it. Line breaks are folded, passwords are masked (the given secrets wherever
// they appear, and whatever looks like a password in a connection string), and
// any other control character is shown as an escape (termsafe.String): an error
// may quote a name or a server message someone else wrote.
func Message(err error, secrets ...string) string {
	var te *TargetError
	if errors.As(err, &te) {
		inner := strings.TrimPrefix(Message(te.Err, secrets...), "pgleader: ")
		inner = strings.NewReplacer("check --dsn (or DATABASE_URL, PG* variables)", "check its dsn in the config file",
			"point --dsn at", "point its dsn at").Replace(inner)
		return termsafe.String(redact("pgleader: target "+te.Name+": "+inner, secrets))
	}
	var (
		in *InputError
		ce *election.ConfigError
	)
	text := oneLine(err.Error())
	switch {
	case errors.As(err, &in):
		text = "pgleader: " + oneLine(in.msg)
	case errors.As(err, &ce):
		text = "pgleader: invalid configuration: " + oneLine(ce.Error())
		if flag, ok := configFlags[ce.Field]; ok {
			text += " (flag " + flag + ")"
		}
	case errors.Is(err, election.ErrUnreachable):
		text += "; check --dsn (or DATABASE_URL, PG* variables) and that PostgreSQL is running and accepts connections there"
	case errors.Is(err, election.ErrUnsupportedServer):
		text += "; point --dsn at PostgreSQL 14 or newer"
	case errors.Is(err, election.ErrSchemaMissing):
		if !strings.Contains(text, "pgleader migrate") {
			text += ": run `pgleader migrate`"
		}
	case !strings.HasPrefix(text, "pgleader"):
		text = "pgleader: " + text
	}
	return termsafe.String(redact(text, secrets))
}

// oneLine folds a multi-line message into one line. pgx joins the errors of its
// connection attempts (with and without TLS, several addresses) with line breaks,
// often repeating one: a line already said is dropped, unless it is a single word
// (such as the command cobra suggests for a typo, which the line before contains).
func oneLine(msg string) string {
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		l = strings.Trim(strings.Join(strings.Fields(l), " "), "; ")
		if l == "" {
			continue
		}
		if strings.Contains(l, " ") && slices.ContainsFunc(parts, func(p string) bool { return strings.Contains(p, l) }) {
			continue
		}
		parts = append(parts, l)
	}
	return strings.Join(parts, "; ")
}

// urlPassword and kvPassword find passwords in connection strings quoted by a
// message: in a URL up to its last '@' (a password may hold an unencoded one),
// in the keyword form a quoted value (with backslash escapes) or one up to the
// next space.
var (
	urlPassword = regexp.MustCompile(`(postgres(?:ql)?://[^:/@\s]*:)\S*@`)
	kvPassword  = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:[^\s"'` + "`" + `\\]|\\.)+)`)
)

// minSecretLen: shorter secrets are not masked literally, because masking every
// occurrence of a two-letter string would mangle the message beyond use; the
// connection-string patterns still apply.
const minSecretLen = 4

func redact(msg string, secrets []string) string {
	for _, s := range secrets {
		if len(s) >= minSecretLen {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	msg = urlPassword.ReplaceAllString(msg, "${1}xxxxx@")
	return kvPassword.ReplaceAllString(msg, "${1}xxxxx")
}

// TargetError is an error about one database of the config file.
type TargetError struct {
	Name string
	Err  error
}

// Error names the target before the error.
func (e *TargetError) Error() string { return "target " + e.Name + ": " + e.Err.Error() }

// Unwrap returns Err: the error keeps its kind, and so its exit code.
func (e *TargetError) Unwrap() error { return e.Err }

// ForTarget names the database of the config file an error is about (nil
// stays nil); Message then reads "pgleader: target NAME: …", its advice about
// --dsn turned to the target's dsn in the config file.
func ForTarget(name string, err error) error {
	if err == nil {
		return nil
	}
	return &TargetError{Name: name, Err: err}
}

// Unreachable reports whether err says the database could not be read: the
// engine's ErrUnreachable, a connection that could not be made or was lost (a
// network error, a timeout, a connection exception (SQLSTATE class 08), a
// server shutting down or starting (57P01–57P03)) — but not a server that
// answered with a refusal the user can fix: a wrong password or login
// (28000, 28P01), a database that does not exist (3D000), a missing privilege
// (42501), which are bad input.
func Unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "28000" || pe.Code == "28P01" || pe.Code == "3D000" || pe.Code == "42501":
			return false
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			return true
		}
	}
	if errors.Is(err, election.ErrUnreachable) {
		return pe == nil || !strings.HasPrefix(pe.Code, "28") && pe.Code != "3D000"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
