package conformance

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Template is the foreign node's command line, as given to
// `pgleader-lab conformance --node`: words split as a POSIX shell splits them
// (single quotes, double quotes, backslash), with no expansion but the
// placeholders {id}, {scope}, {dsn} and {events}, replaced inside each word.
// No shell runs it: the process the kit signals is the node itself.
type Template struct {
	words []string
}

// placeholder matches one {name} in a word.
var placeholder = regexp.MustCompile(`\{[a-z_]+\}`)

// Placeholders are the names a template may use; {id}, {scope} and {events} are
// required ({dsn} may come from DATABASE_URL, which the kit sets too).
var Placeholders = []string{"{id}", "{scope}", "{dsn}", "{events}"}

// ParseTemplate splits s into the words of a command line and checks its
// placeholders. Its errors name the problem and the fix in one line.
func ParseTemplate(s string) (Template, error) {
	words, err := splitWords(s)
	if err != nil {
		return Template{}, err
	}
	if len(words) == 0 {
		return Template{}, errors.New("--node is empty: give the foreign node's command line, e.g. --node 'python3 client.py --id {id} --scope {scope} --dsn {dsn} --events {events}'")
	}
	joined := strings.Join(words, " ")
	for _, p := range placeholder.FindAllString(joined, -1) {
		if !slices.Contains(Placeholders, p) {
			return Template{}, fmt.Errorf("--node: unknown placeholder %s: use %s", p, strings.Join(Placeholders, " "))
		}
	}
	for _, p := range []string{"{id}", "{scope}", "{events}"} {
		if !strings.Contains(joined, p) {
			return Template{}, fmt.Errorf("--node: the command line has no %s: the kit names the node, its scope and its events file through %s", p, strings.Join(Placeholders, " "))
		}
	}
	return Template{words: words}, nil
}

// Argv returns the command line with the placeholders replaced.
func (t Template) Argv(id, scope, dsn, events string) []string {
	r := strings.NewReplacer("{id}", id, "{scope}", scope, "{dsn}", dsn, "{events}", events)
	out := make([]string, len(t.words))
	for i, w := range t.words {
		out[i] = r.Replace(w)
	}
	return out
}

// String is the template as given, re-quoted where a word needs it.
func (t Template) String() string {
	q := make([]string, len(t.words))
	for i, w := range t.words {
		if w == "" || strings.ContainsAny(w, " \t\n'\"\\$`;&|<>()*?") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		q[i] = w
	}
	return strings.Join(q, " ")
}

// splitWords splits s as a POSIX shell splits a simple command's words.
func splitWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // a word has begun (an empty quoted word counts)
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words, in = append(words, cur.String()), false
				cur.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("--node: a single quote is not closed: quote the whole command line for your shell, and each argument with spaces inside it")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i, in = i+1+j, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("--node: a double quote is not closed: quote the whole command line for your shell, and each argument with spaces inside it")
			}
			in = true
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
