package cli

import (
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
