// Package cli holds the conventions every pgleader command shares, so that each
// command in cmd/pgleader is only flag wiring:
//
//   - where the database comes from (ResolveDSN: --dsn, then DATABASE_URL, then the
//     standard PG* variables), and the warnings about where its password is kept
//     (PasswordWarning, PassfileWarning: a file of passwords others may read);
//   - how a failure becomes one line on stderr and an exit code (Message, ExitCode):
//     bad input — a malformed connection string, an unreachable server, PostgreSQL
//     older than 14, a missing schema, an invalid configuration, a usage mistake —
//     exits 2 with a line that names the problem and the fix; any other failure
//     exits 1; a password never reaches the terminal, nor does a control
//     character an error quotes (termsafe);
//   - how logs are written (NewLogger: text or JSON on stderr).
package cli
