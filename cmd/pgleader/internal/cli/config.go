package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/pgleader/pgleader/exporter"
)

// The config file names databases once, so that the watching commands (status,
// history, top, exporter) reach one or several by name:
//
//	targets:
//	  - name: billing
//	    dsn: postgres://ops@billing-db:5432/billing?sslmode=require
//	  - name: orders
//	    dsn: env:ORDERS_DSN            # the whole connection string from $ORDERS_DSN
//	  - name: search
//	    dsn: host=search-db user=ops dbname=search
//	    passfile: /etc/pgleader/search.pgpass
//
// No password belongs in the file: a DSN may name an environment variable
// (env:VARIABLE) that holds it whole, and a passfile (the ~/.pgpass format) may
// be given per target; ~/.pgpass, PGPASSFILE and PGPASSWORD apply as they do to
// --dsn. A DSN in the file that holds a password works, with a warning.

// ConfigEnv is the variable naming the default config file's directory's base:
// $XDG_CONFIG_HOME/pgleader/config.yaml, else ~/.config/pgleader/config.yaml.
const ConfigEnv = "XDG_CONFIG_HOME"

// DefaultConfigPath is where the config file is read from without --config.
func DefaultConfigPath() string {
	dir := os.Getenv(ConfigEnv)
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "pgleader", "config.yaml")
}

// NamedTarget is a database of the config file (or the lone database of --dsn),
// resolved: Name labels it in every view and metric.
type NamedTarget struct {
	Name string
	Target
	// Warnings are one-line warnings to print before use: a password in the
	// config file, a config file or password file group or others may read.
	// Several targets may give the same one; print each once.
	Warnings []string
}

// Config is a parsed config file.
type Config struct {
	Path    string
	Targets []ConfigTarget
}

// ConfigTarget is one entry of targets:, as written (its DSN not resolved).
type ConfigTarget struct {
	Name     string
	DSN      string // as written: a connection string or env:VARIABLE
	Passfile string
	Line     int // where the entry starts in the file
}

// yamlLine is the line a YAML error names ("line 3: did not find expected key").
var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// LoadConfig reads the config file at path. A file that does not exist is
// ErrNoConfig (wrapped, naming it); any other problem — YAML that does not
// parse, an unknown key, a target without a name or DSN, a name given twice —
// is bad input naming the file and line.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoConfig, path)
	}
	if err != nil {
		return nil, BadInput("config %s: %v", path, err)
	}
	return ParseConfig(path, data)
}

// ErrNoConfig is the error of LoadConfig for a file that does not exist.
var ErrNoConfig = errors.New("no config file")

// ParseConfig parses data, the content of the config file at path (path only
// names it in errors).
func ParseConfig(path string, data []byte) (*Config, error) {
	bad := func(line int, format string, args ...any) error {
		return BadInput("config %s:%d: %s", path, line, fmt.Sprintf(format, args...))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// yaml's message reads "yaml: line 3: did not find expected key".
		msg, where := strings.TrimPrefix(err.Error(), "yaml: "), path
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			where, msg = path+":"+m[1], m[2]
		}
		return nil, BadInput("config %s: %s; fix the YAML (the file holds targets: a list of {name: NAME, dsn: DSN})", where, oneLine(msg))
	}
	cfg := &Config{Path: path}
	if len(doc.Content) == 0 {
		return cfg, nil // an empty file: no targets
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, bad(root.Line, "the file must be a mapping with a targets: list (targets: [{name: NAME, dsn: DSN}, …])")
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "targets" {
			return nil, bad(k.Line, "unknown key %q; the file holds only targets:", k.Value)
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue
		}
		if v.Kind != yaml.SequenceNode {
			return nil, bad(v.Line, "targets: must be a list of {name: NAME, dsn: DSN}")
		}
		for _, e := range v.Content {
			if e.Kind != yaml.MappingNode {
				return nil, bad(e.Line, "a target must be a mapping {name: NAME, dsn: DSN}")
			}
			t := ConfigTarget{Line: e.Line}
			for j := 0; j+1 < len(e.Content); j += 2 {
				fk, fv := e.Content[j], e.Content[j+1]
				if fv.Kind != yaml.ScalarNode {
					return nil, bad(fv.Line, "%s: must be a string", fk.Value)
				}
				switch fk.Value {
				case "name":
					t.Name = fv.Value
				case "dsn":
					t.DSN = fv.Value
				case "passfile":
					t.Passfile = fv.Value
				default:
					return nil, bad(fk.Line, "unknown key %q in a target; a target has name, dsn and passfile", fk.Value)
				}
			}
			switch {
			case t.Name == "":
				return nil, bad(e.Line, "a target without a name; give it name: NAME")
			case !exporter.ValidDatabaseName(t.Name): // it becomes the exporter's database label
				return nil, bad(e.Line, "target name %q: use 1–63 letters, digits, '_', '.' or '-', starting with a letter or digit", t.Name)
			case t.DSN == "":
				return nil, bad(e.Line, "target %q has no dsn; give it dsn: DSN (or dsn: env:VARIABLE)", t.Name)
			}
			if first, dup := seen[t.Name]; dup {
				return nil, bad(e.Line, "target %q is named twice (first at line %d); give each target its own name", t.Name, first)
			}
			seen[t.Name] = e.Line
			cfg.Targets = append(cfg.Targets, t)
		}
	}
	return cfg, nil
}

// Names lists the names of the targets, in file order.
func (c *Config) Names() []string {
	out := make([]string, len(c.Targets))
	for i, t := range c.Targets {
		out[i] = t.Name
	}
	return out
}

// Resolve resolves the named targets (all of them when names is empty), in the
// order given: each DSN read from its variable (env:VARIABLE), its passfile
// applied, and parsed like --dsn. An unknown name, a variable not set or a DSN
// that does not parse is bad input naming the file and line.
func (c *Config) Resolve(names []string) ([]NamedTarget, error) {
	var picked []ConfigTarget
	if len(names) == 0 {
		picked = c.Targets
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return nil, BadInput("--target %s is given twice; name each target once", n)
		}
		seen[n] = true
		i := c.index(n)
		if i < 0 {
			if len(c.Targets) == 0 {
				return nil, BadInput("--target %s: %s names no targets; add targets: [{name: %s, dsn: DSN}] to it", n, c.Path, n)
			}
			return nil, BadInput("--target %s: no such target in %s (it names %s)", n, c.Path, strings.Join(c.Names(), ", "))
		}
		picked = append(picked, c.Targets[i])
	}
	if len(picked) == 0 {
		return nil, BadInput("--all-targets: %s names no targets; add targets: [{name: NAME, dsn: DSN}, …] to it", c.Path)
	}
	out := make([]NamedTarget, 0, len(picked))
	for _, ct := range picked {
		nt, err := c.resolveOne(ct)
		if err != nil {
			return nil, err
		}
		out = append(out, nt)
	}
	return out, nil
}

func (c *Config) index(name string) int {
	for i, t := range c.Targets {
		if t.Name == name {
			return i
		}
	}
	return -1
}

func (c *Config) resolveOne(ct ConfigTarget) (NamedTarget, error) {
	where := fmt.Sprintf("config %s:%d: target %s", c.Path, ct.Line, ct.Name)
	dsn, source := ct.DSN, where+" dsn"
	inFile := true
	if v, ok := strings.CutPrefix(dsn, "env:"); ok {
		if v == "" {
			return NamedTarget{}, BadInput("%s: env: names no variable; write dsn: env:VARIABLE", where)
		}
		dsn, inFile = os.Getenv(v), false
		if dsn == "" {
			return NamedTarget{}, BadInput("%s: the environment variable %s (its dsn) is not set or empty; export it, or give the dsn in the file", where, v)
		}
		source = fmt.Sprintf("%s (from $%s)", where, v)
	}
	if ct.Passfile != "" {
		dsn = withPassfile(dsn, ct.Passfile)
	}
	if err := checkURL(dsn); err != nil {
		return NamedTarget{}, BadInput("invalid connection string in %s: %v", source, err)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return NamedTarget{}, BadInput("invalid connection string in %s: %s; fix it (URL form postgres://user@host:5432/dbname, or host=… port=… user=… dbname=…)%s",
			source, parseReason(err, dsn), urlHint(dsn))
	}
	nt := NamedTarget{Name: ct.Name, Target: Target{DSN: dsn, Source: source, Config: cfg}}
	if inFile {
		for _, pw := range dsnPasswords(ct.DSN) {
			if pw != "" {
				nt.Warnings = append(nt.Warnings, "pgleader: warning: "+where+": its dsn holds a password in the file; move it to a passfile (passfile: PATH), ~/.pgpass or an environment variable (dsn: env:VARIABLE)")
				if w := looseSecretFile("config file", c.Path); w != "" {
					nt.Warnings = append(nt.Warnings, w)
				}
				break
			}
		}
	}
	if w := PassfileWarning(dsn); w != "" {
		nt.Warnings = append(nt.Warnings, w)
	}
	return nt, nil
}

// withPassfile adds the passfile parameter to dsn, in its form.
func withPassfile(dsn, passfile string) string {
	if isURL(dsn) {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			q.Set("passfile", passfile)
			u.RawQuery = q.Encode()
			return u.String()
		}
		return dsn // checkURL or ParseConfig reports it
	}
	quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(passfile)
	return strings.TrimSpace(dsn + " passfile='" + quoted + "'")
}
