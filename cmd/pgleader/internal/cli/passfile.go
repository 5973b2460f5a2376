package cli

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
)

// Files that hold passwords must be private. libpq (psql, every libpq client)
// ignores a password file that group or others may read, with a warning; pgx,
// and so pgleader, reads it anyway. pgleader keeps reading it — a deployment
// that works keeps working — and warns, naming the file and the fix.

// kvPassfile is the value of a passfile keyword in the keyword/value form.
var kvPassfile = regexp.MustCompile(`(?:^|\s)passfile\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s\\]|\\.)+)`)

// Passfile returns the password file a connection to dsn reads, as pgx finds
// it: the dsn's passfile parameter, else PGPASSFILE, else ~/.pgpass. It is
// empty when the password comes from elsewhere (the dsn or PGPASSWORD), so
// that no file is read.
func Passfile(dsn string) string {
	for _, pw := range dsnPasswords(dsn) {
		if pw != "" {
			return ""
		}
	}
	if os.Getenv("PGPASSWORD") != "" {
		return ""
	}
	if isURL(dsn) {
		if u, err := url.Parse(dsn); err == nil && u.Query().Get("passfile") != "" {
			return u.Query().Get("passfile")
		}
	} else if m := kvPassfile.FindStringSubmatch(dsn); m != nil {
		v := m[1]
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = v[1 : len(v)-1]
		}
		return unescapeKV(v)
	}
	if p := os.Getenv("PGPASSFILE"); p != "" {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".pgpass")
	}
	return ""
}

// PassfileWarning is the one-line warning for the password file a connection
// to dsn reads (Passfile) when group or others may read it; empty when no file
// is read, the file does not exist, or it is private.
func PassfileWarning(dsn string) string {
	path := Passfile(dsn)
	if path == "" {
		return ""
	}
	return looseSecretFile("password file", path)
}

// looseSecretFile is the warning for a file of secrets (what names its kind)
// that group or others may read, or empty.
func looseSecretFile(what, path string) string {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
		return ""
	}
	return fmt.Sprintf("pgleader: warning: %s %s has group or world access (mode %04o): other users of this host may read its passwords (libpq ignores such a file); chmod 600 %s",
		what, path, fi.Mode().Perm(), path)
}
