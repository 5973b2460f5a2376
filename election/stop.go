package election

// markStopped records a clean shutdown in pgleader.nodes.
func (s *session) markStopped() {
	ctx, cancel := s.stmtCtx(s.e.cfg.HeartbeatTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isLost() {
		return
	}
	var err error
	if s.lease {
		_, err = s.lead.Exec(ctx, "SELECT pgleader.lease_stopped($1, $2)", s.e.cfg.NodeID, s.leaseToken)
	} else {
		_, err = s.lead.Exec(ctx, "SELECT pgleader.node_stopped($1)", s.e.cfg.NodeID)
	}
	if err != nil {
		// The stop goes on (the session ends all the same); only the record is
		// missing: readers of pgleader.nodes see a crash, not a clean stop.
		s.e.log.Warn("cannot record the clean stop in pgleader.nodes", "node", s.e.cfg.NodeID, "err", err)
	}
}
