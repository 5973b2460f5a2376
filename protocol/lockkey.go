package protocol

import (
	"crypto/sha256"
	"encoding/binary"
)

// LockKey returns the default advisory-lock key of a scope: the first 8 bytes of
// sha256 of the scope's UTF-8 bytes as a big-endian signed integer, the same value
// as `SELECT pgleader.lock_key(scope)`.
func LockKey(scope string) int64 {
	sum := sha256.Sum256([]byte(scope))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}
