package election

// markStopped records a clean shutdown in pgleader.nodes.
func (s *session) markStopped() {
	ctx, cancel := s.stmtCtx(s.e.cfg.HeartbeatTimeout)
	defer cancel()
	_ = s.leadDo(func() { // not run when the session is lost: nothing to record on it
		if err := s.m.stopped(ctx, s); err != nil {
			// The stop goes on (the session ends all the same); only the record is
			// missing: readers of pgleader.nodes see a crash, not a clean stop.
			s.e.log.Warn("cannot record the clean stop in pgleader.nodes", "node", s.e.cfg.NodeID, "err", err)
		}
	})
}
