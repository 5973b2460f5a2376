package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/migrations"
	"github.com/pgleader/pgleader/protocol"
)

// The release version (the VERSION file) and the commit, stamped by make build
// and make dist with -ldflags "-X main.version=… -X main.commit=…". A plain
// go build or go install leaves them empty: buildInfo falls back to what the
// Go toolchain recorded.
var (
	version string
	commit  string
)

// versionInfo is what `pgleader version` prints.
type versionInfo struct {
	Version  string `json:"version"` // 1.0.0-rc.1, or dev for an unreleased build
	Commit   string `json:"commit,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"` // GOOS/GOARCH
	Schema   int    `json:"schema"`   // migrations.Latest: what migrate installs and nodes need
	Protocol int    `json:"protocol"` // protocol.Version: what docs/protocol.md describes
}

// buildInfo describes this build: the stamped version and commit; else the
// module version `go install …@vX.Y.Z` recorded and the VCS revision `go build`
// recorded in a git checkout; else "dev".
func buildInfo() versionInfo {
	v := versionInfo{Version: version, Commit: commit, Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Schema: migrations.Latest, Protocol: protocol.Version}
	bi, ok := debug.ReadBuildInfo()
	if v.Version == "" && ok {
		if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
			v.Version = strings.TrimPrefix(mv, "v")
		}
	}
	if v.Commit == "" && ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v.Commit = s.Value[:12]
			}
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	return v
}

// buildVersion names this build in one word, as pgleader.nodes records it:
// "pgleader 1.0.0-rc.1", or "pgleader dev+1a2b3c4d5e6f" for a development build.
func buildVersion() string {
	v := buildInfo()
	if v.Version == "dev" && v.Commit != "" {
		return "pgleader dev+" + v.Commit
	}
	return "pgleader " + v.Version
}

func (a *app) versionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the release version, commit, Go version, and the schema and protocol versions",
		Long: `version prints what this binary is: its release version (dev for an unreleased
build), the commit it was built from, the Go toolchain and platform, the schema
version ` + "`pgleader migrate`" + ` installs and nodes need (migrations.Latest), and the
version of the SQL protocol docs/protocol.md describes (protocol.Version).
It needs no database.`,
		Example: `  pgleader version
  pgleader version -o json`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(*cobra.Command, []string) error {
			v := buildInfo()
			switch output {
			case "json":
				return cli.WriteJSON(a.stdout, v)
			case "text":
			default:
				return cli.BadInput("-o/--output must be text or json (got %q)", output)
			}
			commit := v.Commit
			if commit == "" {
				commit = "unknown (built without VCS information)"
			}
			_, err := fmt.Fprintf(a.stdout, "pgleader %s\ncommit    %s\ngo        %s %s\nschema    %d\nprotocol  %d\n",
				v.Version, commit, v.Go, v.Platform, v.Schema, v.Protocol)
			return err
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output `FORMAT`: text or json")
	return cmd
}
