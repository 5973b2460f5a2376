package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/election/electionapi"
)

func (a *app) isLeaderCommand() *cobra.Command {
	var api, scope string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "is-leader --api ADDR --scope NAME",
		Short: "Exit 0 if the local node leads the scope now (its gate is open), 1 if not",
		Long: `is-leader asks a running pgleader node or pgleader run, through its local API
(--listen), whether it leads the scope at this moment: exit 0 while its gate is
open, 1 otherwise (also when no node answers at ADDR: a node that is not running
leads nothing; or when the API is too busy to answer), 2 for bad input — a
missing flag, or a scope the node does not campaign for. For scripts that
cannot speak HTTP.

The answer holds when it is given: right before an action outside the
database, ask again (or bound the action by the trust remaining it prints),
and fence every write in the database.

Inside a command started by pgleader run --listen, both flags default to the
environment it was given (PGLEADER_LISTEN, PGLEADER_SCOPE).`,
		Example: `  pgleader is-leader --api unix:/run/pgleader/billing.sock --scope billing && ./send-invoices
  pgleader is-leader --api 127.0.0.1:8008 --scope billing`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if api == "" || scope == "" {
				return cli.BadInput("is-leader needs --api ADDR (the node's --listen) and --scope NAME (or PGLEADER_LISTEN and PGLEADER_SCOPE)")
			}
			st, err := askLeader(cmd.Context(), api, scope, timeout)
			var in *cli.InputError
			if errors.As(err, &in) {
				return err
			}
			if err != nil {
				fmt.Fprintf(a.stderr, "pgleader: not leading %s: %v\n", scope, err)
				return &cli.StatusError{Code: cli.ExitFailure}
			}
			if !st.Leading {
				fmt.Fprintf(a.stdout, "%s: %s is %s; leader %s (epoch %d)\n", scope, st.Node, st.Role, orNone(st.Leader), st.Epoch)
				return &cli.StatusError{Code: cli.ExitFailure}
			}
			fmt.Fprintf(a.stdout, "%s: %s leads (epoch %d), trust remaining %.0fms\n", scope, st.Node, st.Epoch, st.TrustRemainingMS)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&api, "api", os.Getenv("PGLEADER_LISTEN"), "the node's local API `ADDR` (its --listen: 127.0.0.1:PORT or unix:PATH) (default $PGLEADER_LISTEN)")
	fl.StringVar(&scope, "scope", os.Getenv("PGLEADER_SCOPE"), "scope `NAME` (default $PGLEADER_SCOPE)")
	fl.DurationVar(&timeout, "timeout", 2*time.Second, "how long to wait for the answer")
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "none seen"
	}
	return s
}

// askLeader calls GET /v1/leader/{scope} on the local API at addr.
func askLeader(ctx context.Context, addr, scope string, timeout time.Duration) (*electionapi.ScopeState, error) {
	tr := &http.Transport{}
	host := addr
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		host = "pgleader"
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
	}
	c := &http.Client{Transport: tr, Timeout: timeout}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v1/leader/"+urlPathEscape(scope), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no node answers at %s (%v)", addr, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var refusal struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(b, &refusal)
	switch {
	case resp.StatusCode == http.StatusNotFound && refusal.Error != "":
		// The node answers, and does not run the scope: a wrong --scope, not
		// "another node leads".
		return nil, cli.BadInput("is-leader --scope %s: %s; check --scope (or PGLEADER_SCOPE) against the node's --scope", scope, refusal.Error)
	case resp.StatusCode == http.StatusMisdirectedRequest:
		return nil, cli.BadInput("is-leader --api %s: %s", addr, refusal.Error)
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable,
		refusal.Error != "": // 503 for a busy API, not a state
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var st electionapi.ScopeState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("unreadable answer from %s: %v", addr, err)
	}
	st.Leading = st.Leading && resp.StatusCode == http.StatusOK
	return &st, nil
}

func urlPathEscape(s string) string { return url.PathEscape(s) }
