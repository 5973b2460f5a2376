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
	if s.lease {
		_, _ = s.lead.Exec(ctx, "SELECT pgleader.lease_stopped($1, $2)", s.e.cfg.NodeID, s.leaseToken)
		return
	}
	_, _ = s.lead.Exec(ctx, "SELECT pgleader.node_stopped($1)", s.e.cfg.NodeID)
}
