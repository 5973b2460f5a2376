package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/pgleader/pgleader/internal/termsafe"
)

// Output formats of the commands that print state.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatTSV   = "tsv"
)

// CheckFormat returns a usage error unless f is table, json or tsv.
func CheckFormat(f string) error {
	switch f {
	case FormatTable, FormatJSON, FormatTSV:
		return nil
	}
	return BadInput("-o/--output must be table, json or tsv (got %q)", f)
}

// Duration formats d for a human at a precision that suits its size: 850µs, 12ms,
// 1.25s, 4m05s, 3h12m, 2d04h.
func Duration(d time.Duration) string {
	if d < 0 {
		return "-" + Duration(-d)
	}
	switch {
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// WriteJSON writes v as the indented JSON document of -o json, followed by a
// newline. Names someone else wrote stay exact but inert: encoding/json escapes
// the C0 controls, termsafe.JSON the rest (DEL, C1, text-direction controls).
func WriteJSON(w io.Writer, v any) error {
	doc, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(termsafe.JSON(doc), '\n'))
	return err
}
