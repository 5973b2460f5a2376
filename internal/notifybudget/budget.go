// Package notifybudget bounds what a session that LISTENs takes in. Any role that
// may connect can NOTIFY any channel as fast as the server takes it (PostgreSQL
// has no privilege for it), and a listener must read every notification the server
// sends it: receiving is the cost, before any handling. A Budget admits so many
// notifications and bytes per Window; a listener past it should close its session,
// which drops what the server still queues for it unread and stops holding the
// tail of the server's notification queue, and stop listening for DeafFor — its
// notifications being hints, it falls back on polling meanwhile.
package notifybudget

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Window is the span a Budget's limits apply to.
const Window = time.Second

const (
	deafFirst  = time.Second      // the first deaf period; doubles per consecutive flood
	deafMax    = 30 * time.Second // … up to this
	maxSenders = 16               // distinct sender pids counted per window (for TopSenders)
)

// CalmAfter is how long a listener must listen without a flood before its next
// flood counts as the first again (see DeafFor).
const CalmAfter = time.Minute

// Budget counts the notifications of the current window. Not safe for concurrent
// use: it belongs to the goroutine that reads the listening session.
type Budget struct {
	maxCount, maxBytes int
	start              time.Time
	count, bytes       int
	senders            map[uint32]int // pid → notifications this window, at most maxSenders pids
}

// New returns a budget of count notifications and bytes payload bytes per Window.
func New(count, bytes int) Budget { return Budget{maxCount: count, maxBytes: bytes} }

// Admit counts a notification of size payload bytes from backend pid, received at
// now, and reports whether the window's budget still holds.
func (b *Budget) Admit(now time.Time, pid uint32, size int) bool {
	if b.senders == nil || now.Sub(b.start) >= Window {
		b.start, b.count, b.bytes, b.senders = now, 0, 0, map[uint32]int{}
	}
	b.count++
	b.bytes += size
	if _, ok := b.senders[pid]; ok || len(b.senders) < maxSenders {
		b.senders[pid]++
	}
	return b.count <= b.maxCount && b.bytes <= b.maxBytes
}

// Window returns what the current window received: notifications and bytes.
func (b *Budget) Window() (count, bytes int) { return b.count, b.bytes }

// TopSenders names the backends that sent most of the window's notifications,
// with their counts: "pid 4242 (3100), pid 4243 (12)".
func (b *Budget) TopSenders() string {
	pids := slices.Collect(maps.Keys(b.senders))
	slices.SortFunc(pids, func(x, y uint32) int {
		return cmp.Or(cmp.Compare(b.senders[y], b.senders[x]), cmp.Compare(x, y))
	})
	var out []string
	for _, pid := range pids[:min(len(pids), 3)] {
		out = append(out, fmt.Sprintf("pid %d (%d)", pid, b.senders[pid]))
	}
	return strings.Join(out, ", ")
}

// DeafFor is how long to stop listening after the floods-th consecutive flood
// (floods ≥ 1): 1 s, doubling, at most 30 s.
func DeafFor(floods int) time.Duration {
	d := deafFirst
	for i := 1; i < floods && d < deafMax; i++ {
		d *= 2
	}
	return min(d, deafMax)
}
