package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The files the Debian package must hold (with their modes), and the man pages
// of the commands whose units and docs name them. A file missing from the
// package fails TestDeb.
var (
	debFiles = map[string]string{
		"./usr/bin/pgleader":                                  "-rwxr-xr-x",
		"./usr/share/doc/pgleader/copyright":                  "-rw-r--r--",
		"./usr/share/bash-completion/completions/pgleader":    "-rw-r--r--",
		"./usr/share/zsh/vendor-completions/_pgleader":        "-rw-r--r--",
		"./usr/share/fish/vendor_completions.d/pgleader.fish": "-rw-r--r--",
		"./usr/lib/systemd/system/pgleader-node@.service":     "-rw-r--r--",
		"./usr/lib/systemd/system/pgleader-exporter.service":  "-rw-r--r--",
		"./etc/pgleader/node.env.example":                     "-rw-r--r--",
		"./etc/pgleader/exporter.env.example":                 "-rw-r--r--",
	}
	manPages = []string{"pgleader", "pgleader-node", "pgleader-run", "pgleader-migrate", "pgleader-status",
		"pgleader-history", "pgleader-top", "pgleader-exporter", "pgleader-version", "pgleader-scope-bind"}
)

// TestDeb builds the Debian package the way make dist does (for linux/amd64
// only, from one build of the binary, without the release's compiler flags so
// that the packages go vet compiled are reused), then checks it with dpkg-deb:
// its control fields, every file, the man pages and completions; extracts it,
// runs the packaged pgleader (version, --help, a man page's command), and has
// systemd-analyze verify the units where systemd-analyze exists.
func TestDeb(t *testing.T) {
	skipRace(t)
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the package test runs on linux/amd64 (this is %s/%s)", runtime.GOOS, runtime.GOARCH)
	}
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("no dpkg-deb on this machine (Debian's dpkg): the package is not checked")
	}
	began := time.Now()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRelease(root, t.TempDir(), "", "0123456789ab", false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bin, err := r.build(ctx, "pgleader", target{"linux", "amd64"}, "")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := r.docs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	built := time.Now()
	debPath, err := r.deb("amd64", bin, docs)
	if err != nil {
		t.Fatal(err)
	}
	wantName := "pgleader_" + strings.Replace(r.version, "-", "~", 1) + "_amd64.deb"
	if filepath.Base(debPath) != wantName {
		t.Errorf("package file %s, want %s", filepath.Base(debPath), wantName)
	}

	info := run(t, "dpkg-deb", "--info", debPath)
	for _, want := range []string{"Package: pgleader\n", "Version: " + strings.Replace(r.version, "-", "~", 1) + "\n",
		"Architecture: amd64\n", "Section: admin\n", "Homepage: https://github.com/pgleader/pgleader\n",
		"Description: leader election through the PostgreSQL a service already runs\n", " postinst", " postrm", " conffiles"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb --info lacks %q:\n%s", want, info)
		}
	}
	if conf := run(t, "dpkg-deb", "--info", debPath, "conffiles"); conf != "/etc/pgleader/exporter.env.example\n/etc/pgleader/node.env.example\n" {
		t.Errorf("conffiles:\n%s", conf)
	}

	listing := map[string]string{} // path → mode
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "--contents", debPath)), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[1], "root/root") {
			t.Errorf("dpkg-deb --contents: %q is not a root-owned entry", line)
			continue
		}
		listing[f[5]] = f[0]
	}
	for path, mode := range debFiles {
		switch got, ok := listing[path]; {
		case !ok:
			t.Errorf("the package lacks %s", path)
		case got != mode:
			t.Errorf("%s has mode %s, want %s", path, got, mode)
		}
	}
	for _, page := range manPages {
		if _, ok := listing["./usr/share/man/man1/"+page+".1.gz"]; !ok {
			t.Errorf("the package lacks the man page %s(1)", page)
		}
	}
	for path := range listing {
		if strings.Contains(path, "chaos") || strings.Contains(path, "bench") || strings.Contains(path, "gen-docs") {
			t.Errorf("the package holds %s: lab and docs commands have no page in it", path)
		}
	}

	dest := t.TempDir()
	run(t, "dpkg-deb", "-x", debPath, dest)
	pkgBin := filepath.Join(dest, "usr", "bin", "pgleader")
	var v struct{ Version, Commit, Platform string }
	if err := json.Unmarshal([]byte(run(t, pkgBin, "version", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != r.version || v.Commit != "0123456789ab" || v.Platform != "linux/amd64" {
		t.Errorf("the packaged pgleader says %+v, want version %s, commit 0123456789ab", v, r.version)
	}
	if help := run(t, pkgBin, "--help"); !strings.Contains(help, "pgleader node") || strings.Contains(help, "chaos") {
		t.Errorf("the packaged pgleader --help:\n%s", help)
	}
	for _, unit := range []string{"pgleader-node@.service", "pgleader-exporter.service"} {
		b, err := os.ReadFile(filepath.Join(dest, "usr", "lib", "systemd", "system", unit))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "ExecStart=/usr/bin/pgleader ") || !strings.Contains(string(b), "ProtectSystem=strict") {
			t.Errorf("%s does not run /usr/bin/pgleader under ProtectSystem=strict", unit)
		}
	}
	copyright, err := os.ReadFile(filepath.Join(dest, "usr", "share", "doc", "pgleader", "copyright"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n",
		"Files: *\nCopyright: 2026 The pgleader authors\nLicense: Apache-2.0\n", "\nLicense: Apache-2.0\n Licensed under the Apache License",
		"Files: github.com/jackc/pgx/v5/*", "Files: go/*"} {
		if !strings.Contains(string(copyright), want) {
			t.Errorf("copyright lacks %q", want)
		}
	}
	if strings.Contains(string(copyright), "toxiproxy") {
		t.Error("copyright names toxiproxy, which the production binary does not link")
	}
	verifyUnits(t, dest)
	t.Logf("binary and docs built in %v, package written and checked in %v", built.Sub(began).Round(time.Millisecond), time.Since(built).Round(time.Millisecond))
}

// verifyUnits runs systemd-analyze verify on the package's units, in a root
// holding the extracted package and this machine's system units (the targets
// they name); any line it prints fails the test.
func verifyUnits(t *testing.T, dest string) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("no systemd-analyze on this machine: the units are not verified")
		return
	}
	units := filepath.Join(dest, "usr", "lib", "systemd", "system")
	sys, err := os.ReadDir("/usr/lib/systemd/system")
	if err != nil {
		t.Logf("no /usr/lib/systemd/system to verify the units against (%v): not verified", err)
		return
	}
	for _, e := range sys {
		if e.Type().IsRegular() && (strings.HasSuffix(e.Name(), ".target") || strings.HasSuffix(e.Name(), ".slice")) {
			b, err := os.ReadFile(filepath.Join("/usr/lib/systemd/system", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(units, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command(sa, "verify", "--man=no", "--root="+dest, "pgleader-node@billing.service", "pgleader-exporter.service")
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestArchive: a release archive holds, under one directory, the binary, the
// license, the README, the copyright of what it links, the man pages and the
// completions, all owned by root and dated the commit's time; SHA256SUMS checks
// with sha256sum -c.
func TestArchive(t *testing.T) {
	skipRace(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRelease(root, t.TempDir(), "", "0123456789ab", false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	docs := filepath.Join(r.out, "docs")
	for name, body := range map[string]string{"man1/pgleader.1.gz": "page", "completions/pgleader.bash": "bash"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(docs, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(docs, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable() // a Go binary with build information, as copyright needs
	if err != nil {
		t.Fatal(err)
	}
	tgt := target{runtime.GOOS, runtime.GOARCH}
	a, err := r.archive("pgleader", tgt, self, docs)
	if err != nil {
		t.Fatal(err)
	}
	dir := "pgleader_" + r.version + "_" + tgt.String()
	if filepath.Base(a) != dir+".tar.gz" {
		t.Errorf("archive %s, want %s.tar.gz", filepath.Base(a), dir)
	}
	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uname != "root" || h.Uid != 0 || !h.ModTime.Equal(r.mtime) {
			t.Errorf("%s: owner %s (%d), time %v; want root, %v", h.Name, h.Uname, h.Uid, h.ModTime, r.mtime)
		}
		if h.Name == dir+"/pgleader" && h.Mode != 0o755 {
			t.Errorf("%s has mode %o, want 755", h.Name, h.Mode)
		}
	}
	for _, want := range []string{dir + "/", dir + "/pgleader", dir + "/LICENSE", dir + "/README.md", dir + "/copyright",
		dir + "/man/man1/pgleader.1.gz", dir + "/completions/pgleader.bash"} {
		if !slices.Contains(names, want) {
			t.Errorf("the archive lacks %s (it holds %v)", want, names)
		}
	}
	if _, err := writeSums(r.out, []string{a}); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "-c", "SHA256SUMS")
		cmd.Dir = r.out
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), dir+".tar.gz: OK") {
			t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
		}
	}
}

// TestChangelogNamesVersion: the CHANGELOG's top section is the release VERSION
// names ("## 1.0.0-rc.1 — …"); a release bumps both.
func TestChangelogNamesVersion(t *testing.T) {
	version, err := readVersion("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if heading, ok := strings.CutPrefix(line, "## "); ok {
			if heading != version && !strings.HasPrefix(heading, version+" ") {
				t.Errorf("CHANGELOG.md's top section is %q; VERSION says %s: name the section after it (## %s — …)", line, version, version)
			}
			return
		}
	}
	t.Error("CHANGELOG.md has no ## section")
}

// skipRace skips a packaging test under -race: packaging runs in one
// goroutine, and compressing 20 MB in race-instrumented code takes minutes.
// make test runs this package again without -race.
func skipRace(t *testing.T) {
	if raceEnabled {
		t.Skip("packaging runs in one goroutine: make test runs this test without -race")
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
