package cli

import (
	"io"
	"log/slog"
)

// NewLogger returns the logger of a command: format "text" or "json", level
// "debug", "info", "warn" or "error" (slog's spelling, e.g. "debug-4", works too).
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, BadInput("invalid --log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, BadInput("invalid --log-format %q: use text or json", format)
}
