package election

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/pgsession"
)

func randomKey() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]))
}

// connConfig returns the configuration of a dedicated connection with the session
// settings that bound failover.
func (e *Elector) connConfig(role string, leased bool) *pgx.ConnConfig {
	c := e.base.Copy()
	// Client-side keepalives too: a connection blocked in a wait (a follower's
	// await_release) must fail, not hang, when the path to the server goes silent.
	// They are set on what the configured DialFunc returns, so a caller's own
	// dialer (Config.ConnConfig: a proxy, a custom resolver, IAM) is kept.
	c.DialFunc = withKeepalive(c.DialFunc, net.KeepAliveConfig{Enable: true,
		Idle: max(e.cfg.SessionLease, time.Second), Interval: time.Second, Count: 3})
	p := c.RuntimeParams
	p["application_name"] = "pgleader " + role + " " + e.cfg.NodeID
	if len(p["application_name"]) > 63 {
		p["application_name"] = p["application_name"][:63]
	}
	// The server notices a vanished client during a statement within this interval.
	p["client_connection_check_interval"] = "1000"
	// Plan each statement of the engine's functions once per session. With the
	// default (auto), PL/pgSQL plans a statement afresh on each of its first five
	// executions, and a follower's claims are few: the claim on the crash-failover
	// path paid ≈2 ms of planning (a third of its server time). Generic plans are
	// built by warm and kept; their values change, their shapes do not.
	p["plan_cache_mode"] = "force_generic_plan"
	pgsession.Apply(&c.Config)
	if leased {
		L := e.cfg.SessionLease
		p["idle_session_timeout"] = strconv.FormatInt(L.Milliseconds(), 10)
		// Keepalives must never end the session before the lease: idle starts at
		// ceil(L) seconds, then 3 probes 1 s apart.
		p["tcp_keepalives_idle"] = strconv.FormatInt(int64((L+time.Second-1)/time.Second), 10)
		p["tcp_keepalives_interval"] = "1"
		p["tcp_keepalives_count"] = "3"
	}
	return c
}

// withKeepalive wraps dial so that the TCP connections it returns probe a silent
// peer as ka says (a connection that is not TCP, a Unix socket, is left alone).
func withKeepalive(dial pgconn.DialFunc, ka net.KeepAliveConfig) pgconn.DialFunc {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			if err := tc.SetKeepAliveConfig(ka); err != nil {
				conn.Close()
				return nil, fmt.Errorf("set TCP keepalives: %w", err)
			}
		}
		return conn, nil
	}
}
