package main

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path"
	"path/filepath"
	"sort"
)

// entry is one file of an archive: its name inside the archive's top
// directory, its mode and content.
type entry struct {
	name string
	mode int64
	data []byte
}

// archive writes out/NAME_VERSION_OS_ARCH.tar.gz: a directory of that name
// holding the binary, LICENSE, README.md and copyright (the licenses of
// everything the binary links), and, when docs is not empty, man/man1/*.1.gz
// and completions/ from it. It returns the archive's path.
func (r *release) archive(name string, t target, bin, docs string) (string, error) {
	base := name + "_" + r.version + "_" + t.String()
	var es []entry
	add := func(n string, mode int64, src string) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		es = append(es, entry{n, mode, b})
		return nil
	}
	if err := add(name, 0o755, bin); err != nil {
		return "", err
	}
	for _, f := range []string{"LICENSE", "README.md"} {
		if err := add(f, 0o644, filepath.Join(r.root, f)); err != nil {
			return "", err
		}
	}
	c, err := r.copyright(bin)
	if err != nil {
		return "", err
	}
	es = append(es, entry{"copyright", 0o644, c})
	if docs != "" {
		for _, pattern := range []string{"man1/*.1.gz", "completions/*"} {
			m, err := filepath.Glob(filepath.Join(docs, pattern))
			if err != nil {
				return "", err
			}
			for _, f := range m {
				rel, _ := filepath.Rel(docs, f)
				if pattern == "man1/*.1.gz" {
					rel = filepath.Join("man", rel)
				}
				if err := add(rel, 0o644, f); err != nil {
					return "", err
				}
			}
		}
	}
	file := filepath.Join(r.out, base+".tar.gz")
	return file, r.writeTarGz(file, base, es)
}

// writeTarGz writes es under dir into file, sorted by name, every file owned by
// root and dated r.mtime, with no name or time in the gzip header: the same
// files always give the same bytes.
func (r *release) writeTarGz(file, dir string, es []entry) (err error) {
	sort.Slice(es, func(i, j int) bool { return es[i].name < es[j].name })
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw, err := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	hdr := func(name string, mode int64, size int64, typ byte) *tar.Header {
		return &tar.Header{Typeflag: typ, Name: name, Mode: mode, Size: size, ModTime: r.mtime,
			Uname: "root", Gname: "root", Format: tar.FormatPAX}
	}
	dirs := map[string]bool{}
	mkdir := func(d string) error {
		if dirs[d] {
			return nil
		}
		dirs[d] = true
		return tw.WriteHeader(hdr(d+"/", 0o755, 0, tar.TypeDir))
	}
	if err := mkdir(dir); err != nil {
		return err
	}
	for _, e := range es {
		name := path.Join(dir, filepath.ToSlash(e.name))
		// The directories between dir and the file, outermost first.
		var parents []string
		for d := path.Dir(name); d != dir; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if err := mkdir(d); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(hdr(name, e.mode, int64(len(e.data)), tar.TypeReg)); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
