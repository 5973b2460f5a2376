//go:build pgleader_lab

package main

import "github.com/spf13/cobra"

// labBuild reports a lab build: `pgleader node` has the --test-* fault hooks.
// Only the lab builds with -tags pgleader_lab (cluster.Build for the tests,
// `make build-lab` for bin/pgleader-lab, with chaos and bench); the production
// binary never does.
const labBuild = true

// addHookFlags registers the hidden fault-test flags of `pgleader node`.
func addHookFlags(cmd *cobra.Command, h *nodeHooks) {
	fl := cmd.Flags()
	fl.DurationVar(&h.pauseWrite, "test-pause-before-write", 0, "fault-test hook: pause `D` between the workload's gate check and its write, then write as if nothing happened")
	_ = fl.MarkHidden("test-pause-before-write")
	fl.BoolVar(&h.skipFence, "test-unsafe-skip-fence", false, "fault-test hook: the workload writes WITHOUT the fence, so the chaos checker can be shown to catch it")
	_ = fl.MarkHidden("test-unsafe-skip-fence")
}
