package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	t.Setenv("ORDERS_DSN", "postgres://ops@orders-db:5432/orders")
	t.Setenv("EMPTY_DSN", "")
	good := `# the fleet
targets:
  - name: billing
    dsn: postgres://ops@billing-db:5432/billing?sslmode=require
  - name: orders
    dsn: env:ORDERS_DSN
  - name: search.eu-1
    dsn: host=search-db user=ops dbname=search
    passfile: /etc/pgleader/it's.pgpass
`
	cfg, err := ParseConfig("fleet.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Names(), ","); got != "billing,orders,search.eu-1" {
		t.Fatalf("names %q", got)
	}
	all, err := cfg.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[1].Config.Host != "orders-db" || all[1].Config.Database != "orders" || all[0].Config.Database != "billing" {
		t.Fatalf("resolved %+v", all)
	}
	if all[2].Config.Database != "search" {
		t.Fatalf("search: %+v", all[2].Config)
	}
	if !strings.Contains(all[2].DSN, `passfile='/etc/pgleader/it\'s.pgpass'`) {
		t.Errorf("passfile not applied: %q", all[2].DSN)
	}
	for _, nt := range all {
		if len(nt.Warnings) != 0 {
			t.Errorf("%s: unexpected warnings %q", nt.Name, nt.Warnings)
		}
	}
	two, err := cfg.Resolve([]string{"orders", "billing"})
	if err != nil || len(two) != 2 || two[0].Name != "orders" || two[1].Name != "billing" {
		t.Fatalf("Resolve(orders, billing) = %+v, %v: want them in the order given", two, err)
	}

	// A password in the file works, with a warning that never quotes it.
	pw, err := ParseConfig("p.yaml", []byte("targets:\n  - {name: a, dsn: 'postgres://u:s3cr3t@h/db'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := pw.Resolve(nil)
	if err != nil || len(r[0].Warnings) != 1 || strings.Contains(r[0].Warnings[0], "s3cr3t") {
		t.Errorf("password warnings %q, %v; want one that does not quote it", r[0].Warnings, err)
	}

	bad := []struct{ name, text, want string }{
		{"yaml", "targets:\n  - name: a\n    dsn: 'x\n", "fleet.yaml:3: found unexpected end of stream"},
		{"yaml indent", "targets:\n  - name: a\n   dsn: x\n", "fleet.yaml:1: did not find expected '-' indicator"},
		{"unknown top key", "targets: []\ndatabases: []\n", "fleet.yaml:2: unknown key \"databases\""},
		{"unknown target key", "targets:\n  - name: a\n    dsn: x\n    password: y\n", "fleet.yaml:4: unknown key \"password\""},
		{"no name", "targets:\n  - dsn: x\n", "fleet.yaml:2: a target without a name"},
		{"bad name", "targets:\n  - {name: 'a b', dsn: x}\n", "fleet.yaml:2: target name \"a b\""},
		{"no dsn", "targets:\n  - name: a\n", "fleet.yaml:2: target \"a\" has no dsn"},
		{"duplicate", "targets:\n  - {name: a, dsn: x}\n  - {name: b, dsn: y}\n  - {name: a, dsn: z}\n", "fleet.yaml:4: target \"a\" is named twice (first at line 2)"},
		{"not a list", "targets: billing\n", "fleet.yaml:1: targets: must be a list"},
		{"not a mapping", "- a\n", "fleet.yaml:1: the file must be a mapping"},
	}
	for _, c := range bad {
		_, err := ParseConfig("fleet.yaml", []byte(c.text))
		var in *InputError
		if !errors.As(err, &in) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line of bad input containing %q", c.name, err, c.want)
		}
	}

	resolveBad := []struct {
		names []string
		want  string
	}{
		{[]string{"nope"}, "--target nope: no such target in fleet.yaml (it names billing, orders, search.eu-1)"},
		{[]string{"billing", "billing"}, "--target billing is given twice"},
	}
	for _, c := range resolveBad {
		if _, err := cfg.Resolve(c.names); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Resolve(%v) = %v, want %q", c.names, err, c.want)
		}
	}
	envBad, _ := ParseConfig("fleet.yaml", []byte("targets:\n  - {name: a, dsn: 'env:EMPTY_DSN'}\n  - {name: b, dsn: 'env:'}\n  - {name: c, dsn: 'postgres://u@h:notaport/db'}\n"))
	for name, want := range map[string]string{
		"a": "fleet.yaml:2: target a: the environment variable EMPTY_DSN (its dsn) is not set",
		"b": "fleet.yaml:3: target b: env: names no variable",
		"c": "invalid connection string in config fleet.yaml:4: target c dsn",
	} {
		if _, err := envBad.Resolve([]string{name}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve(%s) = %v, want %q", name, err, want)
		}
	}
}

func TestLoadConfigMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.yaml")
	if _, err := LoadConfig(path); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("LoadConfig(missing) = %v, want ErrNoConfig", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil || len(cfg.Targets) != 0 {
		t.Fatalf("empty file: %+v, %v", cfg, err)
	}
	if _, err := cfg.Resolve(nil); err == nil || !strings.Contains(err.Error(), "names no targets") {
		t.Errorf("Resolve on an empty file: %v", err)
	}
}

func TestDefaultConfigPath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/x")
	if got := DefaultConfigPath(); got != "/x/pgleader/config.yaml" {
		t.Errorf("with XDG_CONFIG_HOME: %q", got)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/op")
	if got := DefaultConfigPath(); got != "/home/op/.config/pgleader/config.yaml" {
		t.Errorf("without: %q", got)
	}
}
