package cli

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// DefaultNodeID returns <hostname>-<pid>-<6 random hex digits>: unique among the
// processes of a host, and unique across restarts of the same process slot, so a
// restarted node is never mistaken for its previous incarnation.
func DefaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
