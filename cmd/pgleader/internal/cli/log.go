package cli

import (
	"io"
	"log/slog"

	"github.com/pgleader/pgleader/internal/termsafe"
)

// NewLogger returns the logger of a command: format "text" or "json", level
// "debug", "info", "warn" or "error" (slog's spelling, e.g. "debug-4", works too).
// Either format keeps the names someone else wrote (node ids, scopes, server
// messages) from acting on the terminal the log is read on: the text format
// quotes and escapes them itself, the JSON lines go through termsafe.JSON.
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
		return slog.New(slog.NewJSONHandler(jsonLines{w}, opts)), nil
	}
	return nil, BadInput("invalid --log-format %q: use text or json", format)
}

// jsonLines applies termsafe.JSON to each line slog's JSON handler writes (one
// Write per record, so no character is split between two).
type jsonLines struct{ w io.Writer }

func (j jsonLines) Write(p []byte) (int, error) {
	if _, err := j.w.Write(termsafe.JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
