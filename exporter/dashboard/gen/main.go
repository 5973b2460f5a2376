// Command gen writes pgleader's Grafana dashboard (package dashboard's Build) as
// JSON: `go generate ./exporter/...` runs it to refresh
// exporter/pgleader-dashboard.json.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/pgleader/pgleader/exporter/dashboard"
)

func main() {
	out := flag.String("o", "", "file to write (default: standard output)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	d, err := dashboard.Build()
	if err != nil {
		return fmt.Errorf("build dashboard: %w", err)
	}
	b, err := dashboard.JSON(d)
	if err != nil {
		return err
	}
	if out == "" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(out, b, 0o644)
}
