package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeString(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"Empty", "", ""},
		{"ASCII", "billing-01 @host:5432", "billing-01 @host:5432"},
		{"Unicode", "zürich · 東京 ✔ 👩‍💻", "zürich · 東京 ✔ 👩‍💻"},
		{"Backslash", `DOMAIN\host \x1b`, `DOMAIN\host \x1b`},
		{"ClearScreen", "a\x1b[2Jb", `a\x1b[2Jb`},
		{"Colour", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"OSCTitle", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"TabNewlineReturn", "a\tb\nc\rd", `a\tb\nc\rd`},
		{"NUL", "a\x00b", `a\x00b`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1", "a\u009b2Jb\u0085", `a\u009b2Jb\u0085`},
		{"InvalidUTF8", "a\x9b2J\xffb", `a\x9b2J\xffb`},
		{"BidiOverride", "abc\u202edcba\u202c", `abc\u202edcba\u202c`},
		{"BidiIsolates", "\u2066x\u2067y\u2068z\u2069", `\u2066x\u2067y\u2068z\u2069`},
		{"Marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		{"LineSeparators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"ZeroWidthStays", "a\u200bb\u200dc", "a\u200bb\u200dc"},
		{"NonASCIIBeforeUnsafe", "é\x1b", `é\x1b`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := String(tt.in)
			if got != tt.want {
				t.Fatalf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := String(got); again != got {
				t.Fatalf("not idempotent: String(%q) = %q", got, again)
			}
			for _, r := range got {
				if Unsafe(r) {
					t.Fatalf("String(%q) = %q still holds %U", tt.in, got, r)
				}
			}
			if !utf8.ValidString(got) {
				t.Fatalf("String(%q) = %q is not UTF-8", tt.in, got)
			}
		})
	}
}

func TestEscapeUnsafe(t *testing.T) {
	for r := rune(0); r < 0x3000; r++ {
		want := r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x61c || r == 0x200e || r == 0x200f ||
			(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x2028 || r == 0x2029
		if Unsafe(r) != want {
			t.Errorf("Unsafe(%U) = %v, want %v", r, !want, want)
		}
	}
	for _, r := range []rune{0xfffd, 0x1f600, 0x10ffff, 'ä'} {
		if Unsafe(r) {
			t.Errorf("Unsafe(%U) = true", r)
		}
	}
}

func TestEscapeStringNoAllocation(t *testing.T) {
	s := "scope-0001 on host-a, zürich"
	if n := testing.AllocsPerRun(100, func() { _ = String(s) }); n != 0 {
		t.Fatalf("%v allocations for a safe string", n)
	}
}

func TestEscapeJSON(t *testing.T) {
	v := map[string]string{"scope": "a\x1b[2J\u202eb\x7f\u0085\u2066", "plain": "zürich"}
	doc, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	safe := JSON(doc)
	for _, r := range string(safe) {
		if Unsafe(r) && r != '\n' {
			t.Fatalf("%U left in %s", r, safe)
		}
	}
	if !strings.Contains(string(safe), `"a\u001b[2J\u202eb\u007f\u0085\u2066"`) || !strings.Contains(string(safe), "\n  \"") {
		t.Fatalf("document %s", safe)
	}
	var back map[string]string
	if err := json.Unmarshal(safe, &back); err != nil || back["scope"] != v["scope"] || back["plain"] != v["plain"] {
		t.Fatalf("round trip: %q, %v", back, err)
	}
	plain := []byte(`{"a": "b"}`)
	if got := JSON(plain); &got[0] != &plain[0] {
		t.Fatal("a document with nothing to escape was copied")
	}
}
