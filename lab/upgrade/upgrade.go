// Package upgrade proves that a rolling upgrade works: nodes of the previous
// release and of this one campaign together on one schema, and a fresh install of
// this release has the schema the upgrade path leaves.
//
// The policy it checks (docs: release N keeps every SQL function and view that
// nodes of release N−1 call; N+1 may drop them): an operator runs `pgleader
// migrate` of release N while the nodes of N−1 run, then restarts the nodes one
// at a time. Its tests build the previous release's binary from git history
// (BuildPrevious) and this release's from the working tree (cluster.Build).
package upgrade

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PreviousRelease is the commit of the previous release: the nodes a rolling
// upgrade to this working tree starts from. Bump it at each release, to the
// commit that release was tagged at.
const PreviousRelease = "2ef21015a191a26647edd562a5882876df59d0e6"

// BuildPrevious returns the pgleader binary of PreviousRelease (BuildRelease).
func BuildPrevious() (string, error) { return BuildRelease(PreviousRelease) }

// BuildRelease returns the path of the pgleader binary of commit, building it
// the first time from `git archive` of the repository this process runs in, and
// caching it in os.UserCacheDir()/pgleader-upgrade/<commit>/pgleader (a commit's
// source never changes, so neither does its binary). The binary is the shipped
// build: no lab tag, no race detector.
func BuildRelease(commit string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	if err := hasCommit(root, commit); err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("upgrade: no cache directory for the release binary: %w", err)
	}
	dir := filepath.Join(cache, "pgleader-upgrade", commit)
	bin := filepath.Join(dir, "pgleader")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return bin, nil // written by rename, so whole
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	// git archive | tar -x, in two steps so that a failure of either is seen.
	tarball := filepath.Join(src, "source.tar")
	if err := run(exec.Command("git", "-C", root, "archive", "--format=tar", "-o", tarball, commit)); err != nil {
		return "", fmt.Errorf("upgrade: git archive of release %s: %w", commit, err)
	}
	if err := run(exec.Command("tar", "-x", "-f", tarball, "-C", src)); err != nil {
		return "", fmt.Errorf("upgrade: extracting release %s: %w", commit, err)
	}
	// A temporary name in the same directory, renamed once complete: a concurrent
	// or interrupted build never leaves a partial binary under the cached name.
	tmp := filepath.Join(src, ".pgleader.build")
	build := exec.Command("go", "build", "-o", tmp, "./cmd/pgleader")
	build.Dir = src
	// The release's own go.mod and go.sum; no workspace of the caller's, no
	// toolchain download, no VCS stamping (the archive is no repository).
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOTOOLCHAIN=local", "GOWORK=off")
	if err := run(build); err != nil {
		return "", fmt.Errorf("upgrade: building release %s: %w", commit, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// repoRoot returns the top of the git work tree holding the working directory.
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("upgrade: the previous release is built from git history, but %s is not in a git work tree: %w", wd(), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// hasCommit checks that root's history holds commit, naming the fix when it
// does not (a shallow clone, the usual cause).
func hasCommit(root, commit string) error {
	present := func() bool { return exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run() == nil }
	if present() {
		return nil
	}
	// A shallow clone (a CI checkout) may still fetch the one commit from its
	// origin; that it did is the only thing that counts.
	_ = exec.Command("git", "-C", root, "fetch", "--quiet", "--depth=1", "origin", commit).Run()
	if present() {
		return nil
	}
	why := "it is not in this repository's history"
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--is-shallow-repository").Output(); err == nil &&
		strings.TrimSpace(string(out)) == "true" {
		why = "this is a shallow clone"
	}
	return fmt.Errorf("upgrade: cannot build the previous release %s: %s; run `git fetch --unshallow` (or fetch that commit) in %s", commit, why, root)
}

// run runs cmd, returning its output with the error.
func run(cmd *exec.Cmd) error {
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}

func wd() string {
	d, _ := os.Getwd()
	return d
}
