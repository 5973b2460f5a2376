package collector

import "time"

// state is what the collector remembers from one read to the next. Only touched
// under Collector.stateMu.
type state struct {
	reads        uint64                // reads applied
	snapSeq      uint64                // Seq of the last snapshot built
	auditStarted bool                  // the first read of the audit table was made
	lastAudit    int64                 // highest audit id admitted
	firstAudit   int64                 // the first id admitted (0: none yet)
	missing      map[int64]time.Time   // audit ids skipped below it, and when (database time)
	auditHigh    int64                 // newest audit id a read has shown (dbRead.MaxAuditID)
	auditAt      time.Time             // audit.at of the newest row turned into an event
	replayAfter  time.Time             // after an audit reset: the replay skips rows up to this audit.at
	auditReread  bool                  // the last read found an audit reset: read again at once
	terms        map[string][]termRef  // newest terms per scope (previous holders of elected rows)
	streamSeen   map[string]streamMark // leader_state per scope as the logical stream last saw it
	behind       bool                  // the last read missed a change the stream saw (read again)
	scopes       map[string]*scopeMem
	nodes        map[string]nodeMem
	pending      map[string]time.Time // conditions within their grace, by alert key: first seen
	active       map[string]Alert     // alerts of the last snapshot, by key
	fence        map[string][]fenceHit
	fenceCount   map[string]uint64
	evicted      map[string]int64 // scope → epoch whose holder was evicted automatically
	last         *Snapshot        // last good snapshot
	lastOK       time.Time        // collector time of the last successful read
	downSince    time.Time        // first failed read of the current outage
	source       Source           // of the last snapshot
	timeline     int64            // WAL timeline of the last read (0: none yet, or a standby)
}

// scopeMem is what the collector remembers about one scope.
type scopeMem struct {
	leaderlessSince time.Time // collector time; zero while led
	maxEpoch        int64     // highest epoch seen
	lateEpoch       int64     // term whose late heartbeat was reported (0: none)
	freeOpenSince   time.Time // DB time the open term's lock was first seen free
}

type nodeMem struct {
	live      bool // up: live or late (not down, not stopped)
	startedAt time.Time
}

func newState() *state {
	return &state{
		missing: map[int64]time.Time{}, scopes: map[string]*scopeMem{}, nodes: map[string]nodeMem{},
		pending: map[string]time.Time{}, active: map[string]Alert{}, fence: map[string][]fenceHit{},
		fenceCount: map[string]uint64{}, evicted: map[string]int64{}, terms: map[string][]termRef{},
		streamSeen: map[string]streamMark{},
	}
}
