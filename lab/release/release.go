// Command release builds what a pgleader release ships (make dist):
//
//	pgleader_VERSION_OS_ARCH.tar.gz         the production binary for linux/amd64,
//	                                        linux/arm64 and darwin/arm64, with
//	                                        LICENSE, README.md, copyright (every
//	                                        linked module's license), the man
//	                                        pages and the bash, zsh and fish
//	                                        completions
//	pgleader-lab_VERSION_linux_ARCH.tar.gz  the lab binary (chaos, bench) for
//	                                        linux/amd64 and linux/arm64
//	pgleader_DEBVERSION_ARCH.deb            the Debian package, amd64 and arm64
//	SHA256SUMS                              what sha256sum -c checks them with
//
// Every binary is built with CGO_ENABLED=0 -trimpath and -ldflags "-s -w -X
// main.version=VERSION -X main.commit=COMMIT". The man pages and completions
// come from the production command tree (a docs build: -tags pgleader_docs,
// gen-docs); the Debian package is written with nfpm as a library (deb.go).
// Every file time in the archives and packages is the commit's, so a commit
// yields the same bytes on every run with the same Go toolchain.
//
// It lives in lab/ because, like the rest of the lab, it builds and runs
// pgleader without being part of it: nothing imports it, no binary links it,
// and its Go API is no promise (README, "Versioning").
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// target is a GOOS/GOARCH pair.
type target struct{ goos, goarch string }

func (t target) String() string { return t.goos + "_" + t.goarch }

// What a release ships.
var (
	productionTargets = []target{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}}
	labTargets        = []target{{"linux", "amd64"}, {"linux", "arm64"}}
	debArchs          = []string{"amd64", "arm64"}
)

// release is one build of a release into out.
type release struct {
	root    string    // the module's root directory
	out     string    // where the artifacts go (build/ inside it for the rest)
	version string    // VERSION, e.g. 1.0.0-rc.1
	commit  string    // stamped into the binaries
	mtime   time.Time // every file time: the commit's
	// shipped: the release's compiler flags (CGO_ENABLED=0 -trimpath). A test
	// leaves them out to reuse the packages go vet and go test compiled: they
	// would recompile every package (minutes on 2 cores), and they change
	// nothing of what the packaging does.
	shipped bool
	log     io.Writer
}

func main() {
	var (
		out     = flag.String("o", "dist", "write the release into `DIR` (emptied first)")
		version = flag.String("version", "", "the release `VERSION` (default: the VERSION file)")
		commit  = flag.String("commit", "", "the `COMMIT` stamped into the binaries (default: git describe --always --dirty --abbrev=12 --exclude '*')")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "release: unexpected arguments %q; see -h\n", flag.Args())
		os.Exit(2)
	}
	r, err := newRelease(".", *out, *version, *commit, true, os.Stderr)
	if err == nil {
		err = r.dist(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// newRelease reads what is not given from the checkout at root: the version
// from VERSION, the commit and its time from git.
func newRelease(root, out, version, commit string, shipped bool, log io.Writer) (*release, error) {
	r := &release{root: root, out: out, version: version, commit: commit, shipped: shipped, log: log}
	var err error
	if r.version == "" {
		if r.version, err = readVersion(root); err != nil {
			return nil, err
		}
	}
	if r.commit == "" {
		if r.commit, err = r.git("describe", "--always", "--dirty", "--abbrev=12", "--exclude", "*"); err != nil {
			return nil, err
		}
	}
	if strings.HasSuffix(r.commit, "-dirty") {
		fmt.Fprintf(log, "release: the checkout has uncommitted changes: the binaries say commit %s\n", r.commit)
	}
	ct, err := r.git("log", "-1", "--format=%ct")
	if err != nil {
		return nil, err
	}
	sec, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("commit time %q: %w", ct, err)
	}
	r.mtime = time.Unix(sec, 0).UTC()
	return r, nil
}

// readVersion returns the release version the VERSION file at root holds.
func readVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if v == "" || strings.ContainsAny(v, " \t\n/") || strings.HasPrefix(v, "v") {
		return "", fmt.Errorf("VERSION holds %q: want one semantic version without the v, e.g. 1.0.0", v)
	}
	return v, nil
}

func (r *release) git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// dist builds every artifact into r.out and writes SHA256SUMS.
func (r *release) dist(ctx context.Context) error {
	if err := os.RemoveAll(r.out); err != nil {
		return err
	}
	docs, err := r.docs(ctx)
	if err != nil {
		return err
	}
	var artifacts []string
	bins := map[target]string{}
	for _, t := range productionTargets {
		bin, err := r.build(ctx, "pgleader", t, "")
		if err != nil {
			return err
		}
		bins[t] = bin
		a, err := r.archive("pgleader", t, bin, docs)
		if err != nil {
			return err
		}
		artifacts = append(artifacts, a)
	}
	for _, t := range labTargets {
		bin, err := r.build(ctx, "pgleader-lab", t, "pgleader_lab")
		if err != nil {
			return err
		}
		a, err := r.archive("pgleader-lab", t, bin, "")
		if err != nil {
			return err
		}
		artifacts = append(artifacts, a)
	}
	for _, arch := range debArchs {
		d, err := r.deb(arch, bins[target{"linux", arch}], docs)
		if err != nil {
			return err
		}
		artifacts = append(artifacts, d)
	}
	if err := os.RemoveAll(filepath.Join(r.out, "build")); err != nil {
		return err
	}
	sums, err := writeSums(r.out, artifacts)
	if err != nil {
		return err
	}
	for _, a := range append(artifacts, sums) {
		st, err := os.Stat(a)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.log, "%10d  %s\n", st.Size(), filepath.Base(a))
	}
	return nil
}

// writeSums writes dir/SHA256SUMS for files, in the format sha256sum -c reads.
func writeSums(dir string, files []string) (string, error) {
	var b strings.Builder
	names := slices.Clone(files)
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(filepath.Base(a), filepath.Base(b)) })
	for _, f := range names {
		sum, err := sha256File(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, filepath.Base(f))
	}
	path := filepath.Join(dir, "SHA256SUMS")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
