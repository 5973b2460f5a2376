//go:build pgleader_lab

package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/lab/chaos"
)

// labCommands are the commands of a lab build beyond bench and chaos:
// conformance, and the hidden lab-writer, the child that a supervised chaos run
// starts under pgleader run.
func (a *app) labCommands() []*cobra.Command {
	var interval time.Duration
	cmd := &cobra.Command{
		Use:    "lab-writer",
		Short:  "fenced writes from PGLEADER_* (the child of a supervised chaos run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			t, err := a.resolve()
			if err != nil {
				return err
			}
			err = chaos.Writer(cmd.Context(), t.DSN, interval)
			if errors.Is(err, chaos.ErrStale) {
				return &cli.StatusError{Code: 3, Msg: err.Error()}
			}
			return err
		}),
	}
	cmd.Flags().DurationVar(&interval, "interval", 20*time.Millisecond, "time between writes")
	return []*cobra.Command{cmd, a.conformanceCommand()}
}
