package cli

import (
	"encoding/json"
	"io"

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
