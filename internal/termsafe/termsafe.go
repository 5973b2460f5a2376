// Package termsafe makes text that pgleader did not write itself inert on a
// terminal and in row-oriented output.
//
// Node ids, scope names, hostnames, versions, audit details, release reasons and
// error texts come from the database, and anyone who can write the database (or
// run a node) chooses them. Printed raw, an ESC starts a terminal escape sequence
// (clear the screen, recolour, retitle the window, move the cursor), CR and LF
// forge lines and rows, TAB forges TSV columns, and the Unicode bidirectional
// controls reorder what the operator reads. Every view that renders such a string
// passes it through [String] first; the engine refuses the same characters in the
// names it accepts (names.Scope), with [Unsafe] as the one
// definition of them, and refuses the invisible format characters (Unicode Cf)
// there too.
//
// The escapes are for reading, not for decoding: a backslash is left as it is,
// so a name that contains the four characters \x1b looks like one that contains
// ESC. That keeps ordinary names (a Windows host DOMAIN\host) readable and makes
// String idempotent: String(String(s)) == String(s). Tools that need the exact
// bytes read -o json, which is lossless ([JSON]).
package termsafe

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a terminal as it is:
//
//   - the C0 controls U+0000–U+001F, TAB, CR and LF included, and DEL (U+007F);
//   - the C1 controls U+0080–U+009F (U+009B is CSI on many terminals);
//   - the Unicode controls that reorder or break a line: ALM (U+061C), LRM and RLM
//     (U+200E, U+200F), the embeddings and overrides U+202A–U+202E, the isolates
//     U+2066–U+2069, and the line and paragraph separators U+2028, U+2029.
//
// Other invisible characters (zero-width space and joiner) are left alone here:
// they make two names look alike but cannot rewrite the screen or a row, and the
// joiner is part of many scripts and emoji (names that pgleader accepts hold
// none: names.Scope refuses them).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r < 0x61c:
		return false
	}
	switch r {
	case 0x061c, 0x200e, 0x200f, 0x2028, 0x2029:
		return true
	}
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// String returns s with every [Unsafe] character replaced by a visible escape:
// \t, \n and \r; \xHH for the other C0 controls, DEL and bytes that are not
// UTF-8; \uHHHH for the C1 controls and the Unicode controls (\u202e). Printable
// text, non-ASCII included, is returned unchanged, and so is s when it has
// nothing to escape (no allocation). See the package doc for why a backslash is
// not escaped.
func String(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeHex(&b, `\x`, uint32(s[i]), 2)
		case !Unsafe(r):
			b.WriteString(s[i : i+size])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r <= 0x7f:
			writeHex(&b, `\x`, uint32(r), 2)
		default:
			writeHex(&b, `\u`, uint32(r), 4)
		}
		i += size
	}
	return b.String()
}

// firstUnsafe is the byte offset of the first character String escapes, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f { // printable ASCII: the common case
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if Unsafe(r) || (r == utf8.RuneError && size == 1) {
			return i
		}
		i += size
	}
	return -1
}

func writeHex(b *strings.Builder, prefix string, v uint32, digits int) {
	b.WriteString(prefix)
	h := strconv.FormatUint(uint64(v), 16)
	for n := len(h); n < digits; n++ {
		b.WriteByte('0')
	}
	b.WriteString(h)
}

// JSON returns the output of encoding/json with the [Unsafe] characters it
// leaves raw — DEL, the C1 controls and the Unicode direction controls — written
// as \u escapes, so that a document shown on a terminal cannot act on it. The
// document means exactly what it meant (outside strings JSON is ASCII, and
// inside them \u007f is DEL); encoding/json already escapes the C0 controls and
// U+2028, U+2029, and replaces bytes that are not UTF-8. The layout's own
// newlines and indentation are left alone.
func JSON(doc []byte) []byte {
	i := 0
	for i < len(doc) && doc[i] < 0x7f {
		i++
	}
	if i == len(doc) {
		return doc
	}
	out := make([]byte, 0, len(doc)+16)
	out = append(out, doc[:i]...)
	for i < len(doc) {
		r, size := utf8.DecodeRune(doc[i:])
		if r >= 0x7f && Unsafe(r) {
			out = append(out, `\u`...)
			h := strconv.FormatUint(uint64(r), 16)
			for n := len(h); n < 4; n++ {
				out = append(out, '0')
			}
			out = append(out, h...)
		} else {
			out = append(out, doc[i:i+size]...)
		}
		i += size
	}
	return out
}
