package election

import "sync"

// leadReq is a request for leadLoop: run, then a signal on done.
type leadReq struct {
	run  func()
	done chan struct{}
}

// leadReplies are the reply channels of leadDo (cap 1, empty when pooled): a
// heartbeat costs no allocation for its reply.
var leadReplies = sync.Pool{New: func() any { return make(chan struct{}, 1) }}

// leadDo runs fn on the leadership connection, in leadLoop, and returns once fn
// has returned: requests run one at a time, in the order leadLoop takes them (the
// order they were sent). A request leadLoop took is always run and answered,
// also when the session is lost meanwhile (its statement fails: lose closed the
// socket), so fn may write the caller's variables. When the session is lost
// before leadLoop takes it, fn does not run and leadDo returns errSessionLost.
// fn checks isLost itself where a lost session must run nothing (leadLoop may
// take a request sent as the session is lost), and must never wait for
// leadLoop (a leadDo, or close).
func (s *session) leadDo(fn func()) error {
	done := leadReplies.Get().(chan struct{})
	select {
	case s.leadReqs <- leadReq{run: fn, done: done}:
	case <-s.lost:
		leadReplies.Put(done)
		return errSessionLost
	}
	<-done
	leadReplies.Put(done)
	return nil
}

// leadLoop owns the leadership connection (lead) once the session is shared:
// every statement on it (claims, releases, heartbeats, markStopped, nameBlockers,
// endFenced) runs in a leadDo request here, one at a time. It returns when the
// session is lost, after the request in flight (if any) has been answered; close
// waits for it before closing lead. leadReqs is unbuffered, so no request is
// left unanswered in a buffer.
func (s *session) leadLoop() {
	for {
		select {
		case req := <-s.leadReqs:
			req.run()
			req.done <- struct{}{}
		case <-s.lost:
			return
		}
	}
}
