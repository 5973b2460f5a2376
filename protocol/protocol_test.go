package protocol_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"testing"

	"github.com/pgleader/pgleader/protocol"
)

// migrations returns the text of the schema's files in the order they apply:
// the numbered files, then the functions and the views.
func migrations(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"../migrations/*.sql", "../migrations/functions/*.sql", "../migrations/views/*.sql"} {
		f, err := filepath.Glob(pattern)
		if err != nil || len(f) == 0 {
			t.Fatalf("no files %s (%v)", pattern, err)
		}
		sort.Strings(f)
		files = append(files, f...)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// uniq returns the distinct first submatches of re in texts, sorted.
func uniq(re *regexp.Regexp, texts ...string) []string {
	var out []string
	for _, s := range texts {
		for _, m := range re.FindAllStringSubmatch(s, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestLockKey pins the key derivation: the values are what PostgreSQL's
// pgleader.lock_key returns for these scopes (first 8 bytes of sha256 of the UTF-8
// text, signed). Every node, watcher and client must derive the same key, so a
// change here is a change of the protocol.
func TestLockKey(t *testing.T) {
	for _, tc := range []struct {
		scope string
		key   int64
	}{
		{"billing", 906850720199613079}, // docs/design.md §5
		{"orders", 2023957755765852388},
		{"scope/ü", -3526603299973669708}, // multi-byte UTF-8, negative key
	} {
		if got := protocol.LockKey(tc.scope); got != tc.key {
			t.Errorf("LockKey(%q) = %d, pgleader.lock_key gives %d", tc.scope, got, tc.key)
		}
	}
}

// TestReasonsMatchSchema: the reasons Recorded admits are exactly those of the
// latest CHECK constraint terms_release_reason_check in the schema's files.
func TestReasonsMatchSchema(t *testing.T) {
	check := regexp.MustCompile(`(?s)CONSTRAINT terms_release_reason_check CHECK \(release_reason IN\s*\(([^)]*)\)\)`)
	var list string
	for _, m := range migrations(t) {
		for _, c := range check.FindAllStringSubmatch(m, -1) {
			list = c[1]
		}
	}
	if list == "" {
		t.Fatal("no terms_release_reason_check constraint in ../migrations")
	}
	schema := uniq(regexp.MustCompile(`'([a-z_]+)'`), list)
	all := []protocol.Reason{protocol.ReasonResigned, protocol.ReasonShutdown, protocol.ReasonHandedOver,
		protocol.ReasonLostConnection, protocol.ReasonHeartbeatTimeout, protocol.ReasonEvicted,
		protocol.ReasonCrashed, protocol.ReasonDatabaseFailover, protocol.ReasonClosed, protocol.ReasonTrustExpired}
	var recorded []string
	for _, r := range all {
		if !r.Known() {
			t.Errorf("%s: not Known", r)
		}
		if r.Recorded() {
			recorded = append(recorded, string(r))
		}
	}
	sort.Strings(recorded)
	if !slices.Equal(recorded, schema) {
		t.Errorf("Recorded reasons %v, the CHECK constraint admits %v", recorded, schema)
	}
	if protocol.Reason("other").Known() || protocol.Reason("other").Recorded() {
		t.Error(`Reason("other") is Known or Recorded`)
	}
}

// TestSQLStatesMatchSchema: every PLF SQLSTATE the migrations raise has a constant,
// and every constant is raised.
func TestSQLStatesMatchSchema(t *testing.T) {
	raised := uniq(regexp.MustCompile(`ERRCODE = '(PLF[0-9]+)'`), migrations(t)...)
	named := []string{protocol.SQLStateFenced, protocol.SQLStateLockNotHeld, protocol.SQLStateLockKeyMismatch,
		protocol.SQLStateBelowEpochFloor, protocol.SQLStateScopeKey, protocol.SQLStateNodeLive,
		protocol.SQLStateRefused, protocol.SQLStateRetireRefused, protocol.SQLStateModeConflict,
		protocol.SQLStateBindingRefused, protocol.SQLStateOutOfBounds, protocol.SQLStateNotCaller,
		protocol.SQLStateFenceKeyHeld, protocol.SQLStateSessionCap}
	sort.Strings(named)
	if !slices.Equal(named, raised) {
		t.Errorf("constants name %v, the migrations raise %v", named, raised)
	}
}

// TestNotifyMatchesSchema: the migrations NOTIFY on NotifyChannel only, and the
// events they send are exactly the NotifyEvent constants.
func TestNotifyMatchesSchema(t *testing.T) {
	m := migrations(t)
	channels := uniq(regexp.MustCompile(`pg_notify\('([a-z_]+)'`), m...)
	if !slices.Equal(channels, []string{protocol.NotifyChannel}) {
		t.Errorf("the migrations NOTIFY on %v, want only %s", channels, protocol.NotifyChannel)
	}
	sent := uniq(regexp.MustCompile(`'event', '([a-z_]+)'`), m...)
	var named []string
	for _, e := range []protocol.NotifyEvent{protocol.NotifyElected, protocol.NotifyReleased,
		protocol.NotifyResignRequested, protocol.NotifyHandoverRequested, protocol.NotifyNodeJoined,
		protocol.NotifyNodeLost, protocol.NotifyFailover, protocol.NotifyEvicted,
		protocol.NotifyFenceRejected, protocol.NotifyRetired} {
		named = append(named, string(e))
	}
	sort.Strings(named)
	if !slices.Equal(named, sent) {
		t.Errorf("constants name %v, the migrations send %v", named, sent)
	}
}
