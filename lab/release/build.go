package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// build compiles cmd/pgleader for t into out/build/NAME_OS_ARCH/NAME, with the
// build tags given (none: the production binary), and returns its path.
func (r *release) build(ctx context.Context, name string, t target, tags string) (string, error) {
	bin, err := filepath.Abs(filepath.Join(r.out, "build", name+"_"+t.String(), name))
	if err != nil {
		return "", err
	}
	ldflags := "-s -w -X main.version=" + r.version + " -X main.commit=" + r.commit
	args := []string{"build", "-o", bin, "-ldflags", ldflags}
	if r.shipped {
		args = append(args, "-trimpath")
	}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/pgleader")...)
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "GOOS="+t.goos, "GOARCH="+t.goarch)
	if r.shipped {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s (%s): %v\n%s", strings.Join(args, " "), t, err, out)
	}
	return bin, nil
}

// docs writes the man pages (gzipped, as Debian wants them) and the shell
// completions of the production command tree into out/build/docs, from a docs
// build for this machine, and returns that directory: man1/*.1.gz and
// completions/{pgleader.bash,_pgleader,pgleader.fish}.
func (r *release) docs(ctx context.Context) (string, error) {
	here := target{runtime.GOOS, runtime.GOARCH}
	gen, err := r.build(ctx, "pgleader-docs", here, "pgleader_docs")
	if err != nil {
		return "", err
	}
	dir, err := filepath.Abs(filepath.Join(r.out, "build", "docs"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, gen, "gen-docs", "--dir", dir,
		"--source", "pgleader "+r.version, "--date", strconv.FormatInt(r.mtime.Unix(), 10))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no DATABASE_URL, PG*, XDG_* of ours
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("gen-docs: %v\n%s", err, out)
	}
	pages, err := filepath.Glob(filepath.Join(dir, "man1", "*.1"))
	if err != nil || len(pages) == 0 {
		return "", fmt.Errorf("gen-docs wrote no man page into %s (%v)", dir, err)
	}
	for _, p := range pages {
		if err := gzipFile(p); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// gzipFile replaces path by path.gz, compressed at the best level with no name
// and no time in the header (gzip -9n), as Debian policy asks of man pages.
func gzipFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(b); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(path+".gz", buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Remove(path)
}
