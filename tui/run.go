package tui

import (
	"context"
	"errors"
	"fmt"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
)

// ErrPanic is wrapped by the error [Run] returns when the dashboard panicked.
// The terminal has been restored and the panic and its stack printed to stderr
// by then.
var ErrPanic = errors.New("tui: the dashboard panicked")

// Run runs the dashboard on the terminal — alternate screen, mouse off — until
// the operator quits or ctx ends (both return nil). It restores the terminal
// on every exit, a panic included: Bubble Tea recovers panics raised in the
// dashboard's Update, View and commands, restores the terminal and prints the
// panic with its stack; Run then returns an error wrapping [ErrPanic].
func Run(ctx context.Context, feed Feed, opts Options) error {
	return run(ctx, feed, opts)
}

// run is Run with extra program options (tests swap the terminal for pipes).
func run(ctx context.Context, feed Feed, opts Options, extra ...tea.ProgramOption) error {
	m := New(feed, opts)
	defer m.stop() // also when the program was killed and Update never saw a quit
	popts := []tea.ProgramOption{tea.WithContext(ctx)}
	if m.opts.NoColor {
		popts = append(popts, tea.WithColorProfile(colorprofile.Ascii))
	}
	popts = append(popts, extra...)
	_, err := tea.NewProgram(m, popts...).Run()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tea.ErrProgramPanic):
		return fmt.Errorf("%w (see the stack trace above): %w", ErrPanic, err)
	case ctx.Err() != nil && errors.Is(err, tea.ErrProgramKilled):
		return nil // ctx ended: a normal way to stop
	case errors.Is(err, tea.ErrInterrupted):
		return nil // SIGINT
	default:
		return fmt.Errorf("tui: %w", err)
	}
}
