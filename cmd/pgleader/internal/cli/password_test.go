package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPasswordWarning(t *testing.T) {
	for _, tt := range []struct {
		dsn  string
		warn bool
	}{
		{"postgres://app:hunter2@db:5432/app", true},
		{"postgresql://app:p%40ss@db/app?sslmode=require", true},
		{"host=db user=app password=hunter2", true},
		{"host=db user=app password='hunter 2'", true},
		{"postgres://app@db:5432/app", false},
		{"postgres://app:@db/app", false},
		{"host=db user=app", false},
		{"", false},
	} {
		w := PasswordWarning("--dsn", tt.dsn)
		if (w != "") != tt.warn {
			t.Errorf("PasswordWarning(%q) = %q, want a warning: %v", tt.dsn, w, tt.warn)
		}
		if w != "" && (strings.Contains(w, "hunter") || strings.Contains(w, "p%40ss") || strings.Contains(w, "\n") ||
			!strings.Contains(w, "PGPASSWORD") || !strings.Contains(w, "DATABASE_URL") || !strings.Contains(w, ".pgpass")) {
			t.Errorf("PasswordWarning(%q) = %q: one line, naming the fixes, never the password", tt.dsn, w)
		}
	}
}

// TestPassfileWarning: a password file that group or others may read is used
// (as pgx does), with one warning naming it and chmod 600; a private file, a
// missing one, or a password given otherwise gives none.
func TestPassfileWarning(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("*:*:*:*:hunter2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	loose, private, quoted := file("loose", 0o644), file("private", 0o600), file("it's loose", 0o640)
	homePass := filepath.Join(home, ".pgpass")
	for _, tt := range []struct {
		name     string
		env      map[string]string
		homeMode os.FileMode // 0: no ~/.pgpass
		dsn      string
		want     string // the file the warning names; "" for none
	}{
		{"HomeLoose", nil, 0o644, "postgres://u@db/app", homePass},
		{"HomePrivate", nil, 0o600, "postgres://u@db/app", ""},
		{"HomeMissing", nil, 0, "postgres://u@db/app", ""},
		{"EmptyDSN", nil, 0o604, "", homePass},
		{"PasswordInDSN", nil, 0o644, "postgres://u:pw@db/app", ""},
		{"PasswordInKV", nil, 0o644, "host=db password=pw", ""},
		{"PGPASSWORD", map[string]string{"PGPASSWORD": "pw"}, 0o644, "postgres://u@db/app", ""},
		{"PGPASSFILE", map[string]string{"PGPASSFILE": loose}, 0o600, "postgres://u@db/app", loose},
		{"PGPASSFILEPrivate", map[string]string{"PGPASSFILE": private}, 0o644, "postgres://u@db/app", ""},
		{"URLParameter", map[string]string{"PGPASSFILE": private}, 0, "postgres://u@db/app?passfile=" + loose, loose},
		{"KVParameterQuoted", nil, 0, `host=db user=u passfile='` + strings.ReplaceAll(quoted, `'`, `\'`) + `'`, quoted},
		{"KVParameterPrivate", nil, 0o644, "host=db passfile=" + private, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", home)
			t.Setenv("PGPASSWORD", "")
			t.Setenv("PGPASSFILE", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			os.Remove(homePass)
			if tt.homeMode != 0 {
				if err := os.WriteFile(homePass, nil, 0o600); err != nil || os.Chmod(homePass, tt.homeMode) != nil {
					t.Fatal(err)
				}
			}
			w := PassfileWarning(tt.dsn)
			if tt.want == "" {
				if w != "" {
					t.Fatalf("PassfileWarning(%q) = %q, want none", tt.dsn, w)
				}
				return
			}
			if !strings.Contains(w, "password file "+tt.want+" has group or world access") || !strings.HasSuffix(w, "chmod 600 "+tt.want) ||
				strings.Contains(w, "\n") || strings.Contains(w, "hunter2") {
				t.Fatalf("PassfileWarning(%q) = %q; want one line naming %s and chmod 600 %s", tt.dsn, w, tt.want, tt.want)
			}
		})
	}
}

// TestConfigFileModeWarning: a config file that holds a password in a dsn
// and that group or others may read gets a warning naming chmod 600; a
// target's passfile: that others may read, too.
func TestConfigFileModeWarning(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", "")
	dir := t.TempDir()
	pass := filepath.Join(dir, "pass")
	if err := os.WriteFile(pass, nil, 0o600); err != nil || os.Chmod(pass, 0o644) != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	text := "targets:\n  - {name: a, dsn: 'postgres://u:s3cr3t@h/db'}\n  - {name: b, dsn: 'host=h password=s3cr3t'}\n  - {name: c, dsn: 'postgres://u@h/db', passfile: '" + pass + "'}\n"
	for _, mode := range []os.FileMode{0o644, 0o600} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil || os.Chmod(path, mode) != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := cfg.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, nt := range ts {
			var loose bool
			for _, w := range nt.Warnings {
				if strings.Contains(w, "s3cr3t") || strings.Contains(w, "\n") {
					t.Errorf("warning %q: one line, never the password", w)
				}
				loose = loose || strings.Contains(w, "config file "+path+" has group or world access (mode 0644)") && strings.HasSuffix(w, "chmod 600 "+path)
			}
			if wantLoose := mode == 0o644 && nt.Name != "c"; loose != wantLoose {
				t.Errorf("mode %o, target %s: warnings %q; want the chmod 600 warning: %v", mode, nt.Name, nt.Warnings, wantLoose)
			}
			if nt.Name == "c" && (len(nt.Warnings) != 1 || !strings.HasSuffix(nt.Warnings[0], "chmod 600 "+pass)) {
				t.Errorf("target c: warnings %q; want one naming its passfile", nt.Warnings)
			}
		}
	}
}
