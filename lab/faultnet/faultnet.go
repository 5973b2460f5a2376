// Package faultnet is an in-process network fault injector for pgleader's chaos
// harness. A Proxy listens on 127.0.0.1:<free port>, forwards every accepted TCP
// connection to a fixed upstream (typically a PostgreSQL server), and can break that
// path on demand. It embeds the toxiproxy library (github.com/Shopify/toxiproxy/v2,
// v2.12.0) directly: no toxiproxy server process and no HTTP API are involved.
//
// Every connection through a Proxy is two independent one-way pipelines ("links" in
// toxiproxy's terms): client→upstream and upstream→client. Each fault installs a
// toxiproxy toxic on both links of every current and future connection, until Heal.
// Faults of different kinds stack (Latency while Hang is active, say); calling a
// fault that is already active is a no-op, except Latency, which replaces the
// earlier setting.
//
// # Hang: a silent partition
//
// Hang installs toxiproxy's "timeout" toxic with timeout 0 in both directions. The
// toxic reads every chunk the proxy receives and drops it; with timeout 0 it never
// closes anything by itself. Seen from an endpoint, the peer has gone silent: writes
// succeed, reads block, no FIN and no RST arrive. Limits, compared with a real
// partition:
//
//   - The proxy's own sockets keep acknowledging data and keepalive probes, so TCP
//     keepalive and TCP_USER_TIMEOUT on the endpoints never fire. Only
//     application-level timeouts (context deadlines, heartbeats, statement_timeout
//     on the client side) notice the hang. This is the case pgleader's timeouts must
//     handle anyway, and the one that kernel mechanisms cannot.
//   - Bytes sent during the hang are discarded, not delayed. A hung connection can
//     therefore never carry a consistent byte stream again, and toxiproxy closes it
//     when the hang is lifted: removing a timeout toxic runs its Cleanup, which
//     closes the link, so Heal ends every connection that was open during Hang with
//     an orderly close (FIN, read returns io.EOF) on both endpoints. Unlike a real
//     partition, which TCP retransmission survives, connections do not resume.
//     Connections opened after Heal work normally.
//   - Closes still propagate: if an endpoint closes its socket during the hang, the
//     proxy closes the other side.
//   - New connections still succeed during the hang (the proxy accepts them and
//     dials the upstream); they carry no data. A real partition would drop the SYN.
//
// # Reset: abortive close on the next data
//
// Reset installs toxiproxy's "reset_peer" toxic with timeout 0 in both directions.
// The first chunk that arrives on a link after that is discarded and the link's
// destination socket is closed; the endpoint at the other end learns of it when its
// peer reacts (a server that sees its socket closed exits and closes, the proxy then
// closes the client side). Idle connections are untouched until data flows. Whether
// the close is an RST depends on when the connection was accepted:
//
//   - Connections accepted while Reset is active get SO_LINGER 0 on both of the
//     proxy's sockets when toxiproxy sets up their links, so closing them sends a TCP
//     RST: the endpoints' reads fail with ECONNRESET (or io.EOF if the endpoint had
//     already seen a FIN).
//   - Connections that were already open when Reset was called do not get SO_LINGER
//     0 (toxiproxy v2.12.0 sets it only at link setup), so they are closed with a
//     FIN: the endpoints see io.EOF rather than ECONNRESET. Unsent data is still
//     discarded.
//
// In both cases a client's next write followed by a read fails with io.EOF or a
// reset error. A Proxy offers no way to close connections immediately without
// waiting for data; Close does that, but also stops listening.
//
// # Latency
//
// Latency installs toxiproxy's "latency" toxic in both directions: every chunk is
// held until latency±jitter (uniformly distributed) after the proxy received it, so a
// request/response round trip is delayed by about 2×latency. Chunks stay in order
// and throughput is not limited. toxiproxy works in whole milliseconds; Latency
// rounds its arguments up to the next millisecond. With jitter larger than latency
// some chunks are not delayed at all.
//
// # Heal and Close
//
// Heal removes every toxic. Hung connections are closed as described above;
// connections that only had latency keep working, with data already queued in the
// latency toxic forwarded immediately. Close stops the listener and closes every
// proxied connection on both sides (FIN, or RST for sockets toxiproxy set SO_LINGER 0
// on); toxiproxy's per-connection goroutines exit shortly afterwards, asynchronously.
//
// # Known toxiproxy v2.12.0 limitations
//
// A link's pipeline is a chain of goroutines joined by unbuffered channels, and
// toxiproxy stops draining it when the link ends early: when the write to its
// destination fails (the destination endpoint vanished), when a "reset_peer" toxic
// fires, or when Heal closes a hung link. If the source endpoint had more data on
// its way into the pipeline at that moment (a server streaming rows to a client that
// aborts, a client sending several chunks back to back into a reset), the toxic
// goroutine feeding the dead part of the chain, and often the link's reader
// goroutine too, stay blocked on a channel send for the life of the process. They
// hold no file descriptors (the sockets are closed), but goleak reports them. A
// client that writes one request and waits for the answer, as in the tests, does not
// trigger this; one that keeps writing into a Reset usually does.
//
// Changing faults interrupts the toxics of every live link while holding the proxy's
// toxic lock. If that races with a link whose destination write has just failed with
// data in flight, the change (Hang, Reset, Latency, Heal) can block forever. The
// window is the few instructions between the failed write and toxiproxy forgetting
// the link; Close is not affected.
//
// # Logging
//
// toxiproxy's logs are discarded unless the environment variable
// PGLEADER_FAULTNET_LOG is non-empty when New is called; then they are written to
// standard error. The value may name a zerolog level (trace, debug, info, warn,
// error); any other non-empty value means debug.
package faultnet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// LogEnv is the environment variable that, when non-empty, makes New send
// toxiproxy's logs to standard error. See the package documentation.
const LogEnv = "PGLEADER_FAULTNET_LOG"

// ErrClosed is returned by the fault methods of a Proxy after Close.
var ErrClosed = errors.New("faultnet: proxy closed")

// Toxic names are fixed per fault kind and direction so that a fault can be found
// again (to make Hang and Reset idempotent and to replace Latency).
const (
	kindHang    = "hang"
	kindReset   = "reset"
	kindLatency = "latency"
)

var streams = [...]string{"upstream", "downstream"}

func toxicName(kind, stream string) string { return "faultnet_" + kind + "_" + stream }

// Proxy forwards 127.0.0.1:<free port> to upstream (host:port) and can break that
// path on demand. Its methods are safe for concurrent use.
type Proxy struct {
	name     string
	upstream string
	addr     string
	logger   zerolog.Logger
	tp       *toxiproxy.Proxy

	mu     sync.Mutex // serialises fault changes and Close
	closed bool
}

// New starts a proxy named name (used only in toxiproxy's logs) that listens on
// 127.0.0.1 at a free port and forwards every accepted connection to upstream, a
// host:port address. The upstream is dialled once per accepted connection; if that
// dial fails the accepted connection is closed. The returned Proxy is listening.
func New(name, upstream string) (*Proxy, error) { return NewOn(name, "127.0.0.1:0", upstream) }

// NewOn is New listening on listen (host:port; port 0 picks a free one), e.g. the
// host end of a network namespace's veth pair.
func NewOn(name, listen, upstream string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("faultnet: upstream %q: %w", upstream, err)
	}
	if name == "" {
		name = "faultnet"
	}
	logger := newLogger()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), logger)
	tp := toxiproxy.NewProxy(server, name, listen, upstream)
	if err := tp.Start(); err != nil {
		return nil, fmt.Errorf("faultnet: start proxy %q: %w", name, err)
	}
	return &Proxy{
		name:     name,
		upstream: upstream,
		// Start has set Listen to the bound address; nothing changes it later.
		addr:   tp.Listen,
		logger: logger,
		tp:     tp,
	}, nil
}

func newLogger() zerolog.Logger {
	v := os.Getenv(LogEnv)
	if v == "" {
		return zerolog.Nop()
	}
	level, err := zerolog.ParseLevel(v)
	if err != nil || level == zerolog.NoLevel {
		level = zerolog.DebugLevel
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, NoColor: true}).
		Level(level).With().Timestamp().Str("component", "faultnet").Logger()
}

// Addr returns the address clients connect to, "127.0.0.1:port". It stays valid
// after Close (nothing listens there any more).
func (p *Proxy) Addr() string { return p.addr }

// Upstream returns the upstream address given to New.
func (p *Proxy) Upstream() string { return p.upstream }

// Hang stops forwarding in both directions without closing anything: a silent
// partition, built on toxiproxy's "timeout" toxic with timeout 0. Data sent while
// the proxy hangs is discarded, and Heal closes the connections that were open
// during the hang; see the package documentation for the exact behaviour. Calling
// Hang while it is active does nothing.
func (p *Proxy) Hang() error {
	return p.install(kindHang, "timeout", map[string]int64{"timeout": 0}, false)
}

// Reset makes the next data on every connection, in either direction, abort that
// connection, built on toxiproxy's "reset_peer" toxic with timeout 0. Connections
// accepted while Reset is active are aborted with a TCP RST; connections already
// open when Reset is called are closed with a FIN (toxiproxy v2.12.0 sets SO_LINGER
// 0 only on new connections). Idle connections are not touched until data flows.
// The fault stays active, affecting new connections too, until Heal. Calling Reset
// while it is active does nothing.
func (p *Proxy) Reset() error {
	return p.install(kindReset, "reset_peer", map[string]int64{"timeout": 0}, false)
}

// Latency delays every chunk of data by latency±jitter in each direction, so a round
// trip takes about 2×latency longer. Both values are rounded up to whole
// milliseconds and must not be negative. A later call replaces the earlier setting;
// Latency(0, 0) removes the latency fault and leaves other faults in place.
func (p *Proxy) Latency(latency, jitter time.Duration) error {
	if latency < 0 || jitter < 0 {
		return fmt.Errorf("faultnet: negative latency %v or jitter %v", latency, jitter)
	}
	if latency == 0 && jitter == 0 {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return ErrClosed
		}
		return p.removeLocked(kindLatency)
	}
	attrs := map[string]int64{"latency": ceilMillis(latency), "jitter": ceilMillis(jitter)}
	return p.install(kindLatency, "latency", attrs, true)
}

func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Heal removes every toxic, so new connections are forwarded untouched. Connections
// that were hung are closed by toxiproxy as the hang is lifted; see the package
// documentation.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.tp.Toxics.ResetToxics(p.ctx())
	return nil
}

// Close stops listening and closes every proxied connection. It is safe to call more
// than once; later calls do nothing and return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.tp.Stop()
	return nil
}

// ctx carries the logger to the toxiproxy functions that log through
// zerolog.Ctx(ctx).
func (p *Proxy) ctx() context.Context { return p.logger.WithContext(context.Background()) }

// install adds a toxic of type typ with attributes attrs in both directions under
// the names of kind. If the kind is already installed it is replaced when replace is
// true and left alone otherwise.
func (p *Proxy) install(kind, typ string, attrs any, replace bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.tp.Toxics.GetToxic(toxicName(kind, streams[0])) != nil {
		if !replace {
			return nil
		}
		if err := p.removeLocked(kind); err != nil {
			return err
		}
	}
	for i, stream := range streams {
		body, err := json.Marshal(struct {
			Name       string  `json:"name"`
			Type       string  `json:"type"`
			Stream     string  `json:"stream"`
			Toxicity   float32 `json:"toxicity"`
			Attributes any     `json:"attributes"`
		}{toxicName(kind, stream), typ, stream, 1, attrs})
		if err != nil {
			return fmt.Errorf("faultnet: encode %s toxic: %w", typ, err)
		}
		if _, err := p.tp.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
			// Do not leave a one-way fault behind.
			for _, done := range streams[:i] {
				_ = p.tp.Toxics.RemoveToxic(p.ctx(), toxicName(kind, done))
			}
			return fmt.Errorf("faultnet: add %s toxic (%s) to proxy %q: %w", typ, stream, p.name, err)
		}
	}
	return nil
}

// removeLocked removes the toxics of kind, if present. p.mu must be held.
func (p *Proxy) removeLocked(kind string) error {
	for _, stream := range streams {
		err := p.tp.Toxics.RemoveToxic(p.ctx(), toxicName(kind, stream))
		if err != nil && !errors.Is(err, toxiproxy.ErrToxicNotFound) {
			return fmt.Errorf("faultnet: remove %s toxic (%s) from proxy %q: %w", kind, stream, p.name, err)
		}
	}
	return nil
}
