package names

import (
	"fmt"
	"os"
	"regexp"
	"testing"
)

func TestDefaultNodeID(t *testing.T) {
	host, _ := os.Hostname()
	id := DefaultNodeID()
	want := regexp.MustCompile("^" + regexp.QuoteMeta(host) + fmt.Sprintf("-%d-", os.Getpid()) + "[0-9a-f]{6}$")
	if !want.MatchString(id) {
		t.Fatalf("DefaultNodeID() = %q", id)
	}
	if id == DefaultNodeID() {
		t.Fatal("two default node ids are equal")
	}
	if err := NodeID(id); err != nil {
		t.Fatal(err)
	}
}
