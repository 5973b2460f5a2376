// Package names holds the rules of the names pgleader prints on operators'
// terminals and stores in the database: scope names and node ids (the schema's
// check_name enforces the same), and the default node id.
package names

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pgleader/pgleader/internal/termsafe"
)

// MaxLen is the longest scope name or node id, in bytes (the schema enforces
// it too).
const MaxLen = 200

// DefaultNodeID returns <hostname>-<pid>-<6 random hex digits>: unique among the
// processes of a host, and unique across restarts of the same process slot, so a
// restarted node is never mistaken for its previous incarnation. The engine
// uses it when Config.NodeID is empty.
func DefaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	// Keep the id within the limits of a node id whatever the hostname holds.
	host = strings.Map(func(r rune) rune {
		if termsafe.Unsafe(r) {
			return '_'
		}
		return r
	}, host)
	if len(host) > 64 {
		host = host[:64]
	}
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return fmt.Sprintf("%s-%d-%s", strings.ToValidUTF8(host, "_"), os.Getpid(), hex.EncodeToString(b[:]))
}

// Scope reports why name cannot be a scope, or nil: it is empty,
// longer than MaxLen bytes, not UTF-8, or holds a character that would act
// on a terminal instead of showing — a control character (C0 with TAB, CR and LF,
// DEL, C1) or a Unicode direction control (termsafe.Unsafe) — or an invisible
// format character (Unicode category Cf: zero-width space and joiners U+200B–
// U+200D, word joiner and invisible operators U+2060–U+2064, BOM U+FEFF, soft
// hyphen, tags, …), with which two names that print alike would be two scopes or
// two nodes. The error is one line naming the character as an escape and its
// position.
func Scope(name string) error { return validate("scope name", name) }

// NodeID reports why id cannot be a node id, or nil: the rules of scope
// names (Scope) apply, and a node id holds no quote (' " `) or
// backslash, since it appears in the commands that hints suggest (`pgleader node
// forget 'ID'`). The database refuses the same ids (pgleader.check_name, PLF11).
func NodeID(id string) error {
	if err := validate("node id", id); err != nil {
		return err
	}
	if i := strings.IndexAny(id, "'\"`\\"); i >= 0 {
		return fmt.Errorf("node id %q holds %q: a node id holds no quote or backslash", id, id[i:i+1])
	}
	return nil
}

// validate applies the rules of scope names to what (a scope name, a node
// id).
func validate(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s must not be empty", what)
	case len(name) > MaxLen:
		return fmt.Errorf("%s is %d bytes, longer than the limit of %d", what, len(name), MaxLen)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%s %q contains a NUL byte, which PostgreSQL text cannot store", what, name)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s %q is not valid UTF-8", what, name)
	}
	pos := 0
	for _, r := range name {
		pos++
		if termsafe.Unsafe(r) {
			kind := "control character"
			switch {
			case r == 0x2028 || r == 0x2029:
				kind = "line separator"
			case r > 0x9f:
				kind = "text-direction control"
			}
			return fmt.Errorf("%s %q has the %s %s at character %d: use printable characters only (letters, digits, punctuation, symbols, spaces)",
				what, name, kind, termsafe.String(string(r)), pos)
		}
		if unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("%s %q has the invisible format character %s at character %d: use printable characters only (letters, digits, punctuation, symbols, spaces)",
				what, name, uEscape(r), pos)
		}
	}
	return nil
}

// uEscape is r as a Go escape: \uHHHH, or \UHHHHHHHH beyond the BMP.
func uEscape(r rune) string {
	if r > 0xffff {
		return fmt.Sprintf("\\U%08x", r)
	}
	return fmt.Sprintf("\\u%04x", r)
}
