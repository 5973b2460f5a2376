package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/collector/logical"
	"github.com/pgleader/pgleader/election"
	"github.com/pgleader/pgleader/internal/pgsession"
)

func (a *app) slotsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "slots",
		Short: "List or drop the logical replication slots a collector reads through",
		Long: `slots shows the pgoutput logical replication slots of the database: the ones
pgleader collectors read pgleader_events through (collector/logical), and any
other pgoutput subscriber's.

A temporary slot lives as long as its collector's connection. A permanent slot
stays until it is dropped, and the server keeps all WAL it may still need
whether or not anyone reads it: an abandoned permanent slot fills the disk.
Drop slots no collector uses.`,
		Example: `  pgleader slots list
  pgleader slots drop pgleader_collector_1`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(a.slotsListCommand(), a.slotsDropCommand())
	return cmd
}

func (a *app) slotsListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the pgoutput replication slots of the database and the WAL each retains",
		Long: `list prints every pgoutput logical replication slot of the database: its name,
whether it is temporary, the backend pid reading it (none: inactive), its
confirmed flush LSN (changes committed before it are not sent again) and the WAL
the server retains for it. An inactive permanent slot gets a warning on stderr.

Output: -o table (default), json or tsv.`,
		Example: `  pgleader slots list
  pgleader slots list -o json`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckFormat(output); err != nil {
				return err
			}
			return a.withSlotsConn(cmd, func(ctx context.Context, conn *pgx.Conn) error {
				slots, err := logical.ListSlots(ctx, conn)
				if err != nil {
					return err
				}
				if err := writeSlots(a.stdout, slots, output); err != nil {
					return err
				}
				for _, s := range slots {
					if !s.Active && !s.Temporary {
						fmt.Fprintf(a.stderr, "warning: inactive permanent slot %s retains %s of WAL: drop it with `pgleader slots drop %s` if no collector uses it\n",
							s.Name, humanBytes(s.RetainedBytes), s.Name)
					}
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", cli.FormatTable, "output `FORMAT`: table, json or tsv")
	return cmd
}

func (a *app) slotsDropCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "drop NAME",
		Short: "Drop a pgoutput replication slot, freeing the WAL it retains",
		Long: `drop drops the pgoutput logical replication slot NAME of the database and
prints what it dropped. It refuses a slot that a connection is reading (stop that
collector first) and slots of other output plugins.

A collector reading a permanent slot resumes where it stopped; once its slot is
dropped, it starts again from the present and what was committed meanwhile is
only seen by polling.`,
		Example: `  pgleader slots drop pgleader_collector_1`,
		Args:    cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			return a.withSlotsConn(cmd, func(ctx context.Context, conn *pgx.Conn) error {
				s, err := logical.LookupSlot(ctx, conn, name)
				if errors.Is(err, logical.ErrNoSlot) {
					return cli.BadInput("no replication slot is called %q: see `pgleader slots list`", name)
				}
				if err != nil {
					return err
				}
				if err := logical.DropSlot(ctx, conn, name); err != nil {
					if errors.Is(err, logical.ErrNoSlot) {
						return cli.BadInput("no replication slot is called %q: see `pgleader slots list`", name)
					}
					return err
				}
				fmt.Fprintf(a.stdout, "dropped %s slot %s (plugin %s, confirmed flush %s, retained %s of WAL)\n",
					slotKind(s), s.Name, s.Plugin, orDash(s.ConfirmedFlush), humanBytes(s.RetainedBytes))
				return nil
			})
		}),
	}
}

// withSlotsConn runs fn on an ordinary connection to the invocation's database,
// with a context that SIGINT and SIGTERM cancel. The slot commands need no
// pgleader schema: they work on any database.
func (a *app) withSlotsConn(cmd *cobra.Command, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t, err := a.resolve()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second) // the connection attempt's, not the command's
	conn, err := pgsession.Connect(cctx, t.Config)
	cancel()
	if err != nil {
		return fmt.Errorf("%w: cannot connect to %s:%d: %v", election.ErrUnreachable, t.Config.Host, t.Config.Port, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(ctx, conn)
}

func writeSlots(w io.Writer, slots []logical.Slot, format string) error {
	switch format {
	case cli.FormatJSON:
		return cli.WriteJSON(w, orEmpty(slots))
	case cli.FormatTSV:
		fmt.Fprintln(w, "name\ttemporary\tactive_pid\tconfirmed_flush_lsn\tretained_bytes")
		for _, s := range slots {
			fmt.Fprintf(w, "%s\t%t\t%d\t%s\t%d\n", s.Name, s.Temporary, s.ActivePID, s.ConfirmedFlush, s.RetainedBytes)
		}
		return nil
	}
	if len(slots) == 0 {
		fmt.Fprintln(w, "no pgoutput replication slots in this database")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tKIND\tACTIVE PID\tCONFIRMED FLUSH\tRETAINED WAL")
	for _, s := range slots {
		pid := "—"
		if s.Active {
			pid = fmt.Sprint(s.ActivePID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, slotKind(s), pid, orDash(s.ConfirmedFlush), humanBytes(s.RetainedBytes))
	}
	return tw.Flush()
}

// slotKind is "temporary" or "permanent".
func slotKind(s logical.Slot) string {
	if s.Temporary {
		return "temporary"
	}
	return "permanent"
}

// humanBytes formats n in binary units: 512 B, 16 MB, 1.5 GB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	u := []string{"kB", "MB", "GB", "TB", "PB"}[exp]
	if v < 10 {
		return fmt.Sprintf("%.1f %s", v, u)
	}
	return fmt.Sprintf("%.0f %s", v, u)
}
