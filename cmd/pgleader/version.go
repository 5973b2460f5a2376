package main

import (
	"runtime/debug"
)

// buildVersion names this build: "pgleader <module version>", or the VCS
// revision for a development build ("pgleader dev+1a2b3c4d").
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "pgleader dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return "pgleader " + v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 8 {
			return "pgleader dev+" + s.Value[:8]
		}
	}
	return "pgleader dev"
}
