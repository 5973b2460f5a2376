package main

import (
	"context"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/election/electionapi"
)

// listenFlags are the local API's flags, on node and run.
type listenFlags struct {
	addr        string
	allowRemote bool
	allowResign bool
	maxConns    int
	maxStreams  int
}

func (l *listenFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&l.addr, "listen", "", "serve the local leadership API on `ADDR`: 127.0.0.1:PORT or unix:PATH (a socket file of mode 0660; abstract unix:@NAME is refused) (GET /v1/leader/{scope}: 200 while this node leads; docs/any-language.md) (default off)")
	fl.BoolVar(&l.allowRemote, "listen-allow-remote", false, "allow a --listen address that is not loopback (anyone who reaches it learns who leads)")
	fl.IntVar(&l.maxConns, "listen-max-conns", electionapi.DefaultMaxConns, "`N` connections the local API holds at once; one more is answered 503 and closed")
	fl.IntVar(&l.maxStreams, "listen-max-streams", electionapi.DefaultMaxStreams, "`N` GET /v1/transitions streams the local API serves at once; one more is answered 503")
	fl.BoolVar(&l.allowResign, "listen-allow-resign", false, "enable POST /v1/resign/{scope} on the local API (the request must carry the header X-Pgleader: 1; a cross-site one is refused)")
}

// open opens the listener before anything campaigns: a bad address is bad input.
func (l *listenFlags) open() (net.Listener, error) {
	if l.maxConns < 1 || l.maxStreams < 1 || l.maxStreams > l.maxConns {
		return nil, cli.BadInput("--listen-max-conns (%d) and --listen-max-streams (%d) must be at least 1, and the streams at most the connections", l.maxConns, l.maxStreams)
	}
	if l.addr == "" {
		if l.allowRemote || l.allowResign {
			return nil, cli.BadInput("--listen-allow-remote and --listen-allow-resign need --listen ADDR")
		}
		return nil, nil
	}
	ln, err := electionapi.Listen(l.addr, l.allowRemote)
	if err != nil {
		return nil, cli.BadInput("cannot use --listen %s: %v", l.addr, err)
	}
	return ln, nil
}

// serveAPI serves the API on ln (if any) until ctx ends; the returned function
// waits for the server to stop.
func (a *app) serveAPI(ctx context.Context, ln net.Listener, l *listenFlags, e *election.Elector, extra func() any, ready func(string) bool) func() {
	if ln == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h := electionapi.Handler(e, electionapi.Options{AllowResign: l.allowResign, Extra: extra, Ready: ready, Log: a.log,
			Hosts: l.hosts(), MaxStreams: l.maxStreams})
		if err := electionapi.Serve(ctx, ln, h, l.maxConns); err != nil {
			a.log.Warn("local API stopped", "addr", l.addr, "err", err)
		}
	}()
	a.log.Info("local API listening", "addr", l.addr)
	return func() { <-done }
}

// hosts are the names a request's Host may carry besides loopback addresses
// and localhost: the host of a TCP --listen address.
func (l *listenFlags) hosts() []string {
	if host, _, err := net.SplitHostPort(l.addr); err == nil && !strings.HasPrefix(l.addr, "unix:") {
		return []string{host}
	}
	return nil
}
