//go:build pgleader_lab

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/pgleader/pgleader/cmd/pgleader/internal/cli"
	"github.com/pgleader/pgleader/lab/upgrade"
)

// baselineBinary resolves --baseline: the path of an executable, else a git ref
// of the repository the working directory is in, built once (upgrade.BuildRelease
// caches it). It returns the binary and a label for the report.
func baselineBinary(ref string) (bin, label string, err error) {
	if fi, serr := os.Stat(ref); serr == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return ref, ref, nil
	}
	out, gerr := exec.Command("git", "rev-parse", "--verify", "--quiet", ref+"^{commit}").Output()
	if gerr != nil {
		return "", "", cli.BadInput("--baseline %s: neither an executable nor a commit of this repository (run it inside the repository, or build the baseline and pass its path)", ref)
	}
	commit := strings.TrimSpace(string(out))
	if bin, err = upgrade.BuildRelease(commit); err != nil {
		return "", "", err
	}
	return bin, commit[:8], nil
}

// baselineDatabase creates, on the harness's throwaway server, a database for
// the baseline and migrates it with the baseline's own `pgleader migrate`.
func baselineDatabase(ctx context.Context, h *harness, bin string) (string, error) {
	if h.srv == nil {
		return "", fmt.Errorf("--baseline: no throwaway server")
	}
	const name = "pgleader_bench_baseline"
	if err := h.srv.CreateDatabase(ctx, name); err != nil {
		return "", fmt.Errorf("--baseline: create its database: %w", err)
	}
	dsn := h.srv.DSN(name)
	if out, err := exec.CommandContext(ctx, bin, "migrate", "--dsn", dsn).CombinedOutput(); err != nil {
		return "", fmt.Errorf("--baseline: its pgleader migrate: %w: %s", err, out)
	}
	return dsn, nil
}
