package election

import (
	"sync"
	"time"

	"github.com/pgleader/pgleader/internal/monotime"
)

// endedFor is how long a node counts as having just lost its leadership session
// (noteEnded): long enough for its backend to finish exiting on a loaded server.
const endedFor = time.Second

// endedNodes is a session's registry of the nodes whose leadership session this
// node saw end (the ring watch found the beacon free), with when (monotime); a
// claim that finds such a node still holding a scope waits for its backend to
// exit (retryEnded) instead of reporting a live holder. Entries expire after
// endedFor. Its mutex is a leaf (locks.go).
type endedNodes struct {
	mu    sync.Mutex
	ended map[string]int64
}

// noteEnded records that node's leadership session was seen to end just now.
func (q *endedNodes) noteEnded(node string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := monotime.Now()
	for n, at := range q.ended {
		if time.Duration(now-at) > endedFor {
			delete(q.ended, n)
		}
	}
	if q.ended == nil {
		q.ended = map[string]int64{}
	}
	q.ended[node] = now
}

// rejoined forgets that node's session ended: a new session of the same node id
// registered (node_joined), and the lock it holds is that live session's, which
// no wait would see freed. Node ids often survive a restart (a pod's name, a
// configured id); without this, a claim finding the restarted node leading
// waited out retryEnded's whole budget with the connection held.
func (q *endedNodes) rejoined(node string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.ended, node)
}

// justEnded reports whether node's leadership session was seen to end within
// endedFor.
func (q *endedNodes) justEnded(node string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	at, ok := q.ended[node]
	return ok && time.Duration(monotime.Now()-at) <= endedFor
}
