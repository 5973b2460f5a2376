package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

// debDescription is the package's Description: a synopsis, then the rest.
const debDescription = `leader election through the PostgreSQL a service already runs
 pgleader elects exactly one leader per scope among the replicas of a service,
 through PostgreSQL: a session advisory lock on a dedicated connection, an
 epoch fencing token the database itself enforces, heartbeats and a trust
 window. This package holds the pgleader command (node, run, migrate, status,
 history, top, exporter, handover, resign, …), its man pages and shell
 completions, and systemd units for nodes (pgleader-node@NAME, configured by
 /etc/pgleader/NAME.env) and for the Prometheus exporter.`

// deb writes out/pgleader_DEBVERSION_ARCH.deb for the linux binary bin and the
// docs directory of docs, and returns its path.
func (r *release) deb(arch, bin, docs string) (string, error) {
	pkg := filepath.Join(r.root, "lab", "release", "package")
	build := filepath.Join(r.out, "build", "deb-"+arch)
	if err := os.MkdirAll(build, 0o755); err != nil {
		return "", err
	}
	c, err := r.copyright(bin)
	if err != nil {
		return "", err
	}
	copyrightFile := filepath.Join(build, "copyright")
	if err := os.WriteFile(copyrightFile, c, 0o644); err != nil {
		return "", err
	}

	file := func(src, dst string, mode os.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: mode}}
	}
	contents := files.Contents{
		file(bin, "/usr/bin/pgleader", 0o755),
		file(copyrightFile, "/usr/share/doc/pgleader/copyright", 0o644),
		file(filepath.Join(docs, "completions", "pgleader.bash"), "/usr/share/bash-completion/completions/pgleader", 0o644),
		file(filepath.Join(docs, "completions", "_pgleader"), "/usr/share/zsh/vendor-completions/_pgleader", 0o644),
		file(filepath.Join(docs, "completions", "pgleader.fish"), "/usr/share/fish/vendor_completions.d/pgleader.fish", 0o644),
		file(filepath.Join(pkg, "pgleader-node@.service"), "/usr/lib/systemd/system/pgleader-node@.service", 0o644),
		file(filepath.Join(pkg, "pgleader-exporter.service"), "/usr/lib/systemd/system/pgleader-exporter.service", 0o644),
	}
	for _, example := range []string{"node.env.example", "exporter.env.example"} {
		c := file(filepath.Join(pkg, example), "/etc/pgleader/"+example, 0o644)
		c.Type = files.TypeConfigNoReplace
		contents = append(contents, c)
	}
	pages, err := filepath.Glob(filepath.Join(docs, "man1", "*.1.gz"))
	if err != nil {
		return "", err
	}
	for _, p := range pages {
		contents = append(contents, file(p, "/usr/share/man/man1/"+filepath.Base(p), 0o644))
	}

	info := nfpm.WithDefaults(&nfpm.Info{
		Name:        "pgleader",
		Arch:        arch,
		Platform:    "linux",
		Version:     r.version,
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  "The pgleader authors",
		Description: debDescription,
		Homepage:    "https://github.com/pgleader/pgleader",
		License:     "Apache-2.0",
		MTime:       r.mtime,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(pkg, "postinst"),
				PostRemove:  filepath.Join(pkg, "postrm"),
			},
		},
	})
	path := filepath.Join(r.out, deb.Default.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := deb.Default.Package(info, f); err != nil {
		f.Close()
		return "", fmt.Errorf("deb %s: %w", arch, err)
	}
	return path, f.Close()
}
