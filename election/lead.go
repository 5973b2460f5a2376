package election

import "sync"

// leadReq is a request for leadLoop: run, then whether it ran on done.
type leadReq struct {
	run  func()
	done chan bool
}

// leadReplies are the reply channels of leadDo (cap 1, empty when pooled): a
// heartbeat costs no allocation for its reply.
var leadReplies = sync.Pool{New: func() any { return make(chan bool, 1) }}

// leadDo runs fn on the leadership connection, in leadLoop, and returns once fn
// has returned: requests run one at a time, in the order leadLoop takes them (the
// order they were sent). fn runs only while the session is not lost: when it is
// lost before fn would start, fn does not run and leadDo returns errSessionLost.
// A request that started is run to its end and answered, also when the session
// is lost meanwhile (its statement fails: lose closed the socket), so fn may
// write the caller's variables. fn must never wait for leadLoop (a leadDo, or
// close).
func (s *session) leadDo(fn func()) error {
	done := leadReplies.Get().(chan bool)
	select {
	case s.leadReqs <- leadReq{run: fn, done: done}:
	case <-s.lost:
		leadReplies.Put(done)
		return errSessionLost
	}
	ran := <-done
	leadReplies.Put(done)
	if !ran {
		return errSessionLost
	}
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
			// The one place that tells a lost session from a live one for every
			// request: a request taken as the session is lost runs nothing.
			ran := !s.isLost()
			if ran {
				req.run()
			}
			req.done <- ran
		case <-s.lost:
			return
		}
	}
}
