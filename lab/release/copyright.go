package main

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// errNoLicense: a linked module without a license file in the module cache.
var errNoLicense = errors.New("no license file")

// copyrightHead is the machine-readable Debian copyright file's header and
// pgleader's own paragraph; copyright appends one paragraph per module the
// binary links, and the Go standard library's.
const copyrightHead = `Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: pgleader
Upstream-Contact: https://github.com/pgleader/pgleader/issues
Source: https://github.com/pgleader/pgleader

Files: *
Copyright: 2026 The pgleader authors
License: Apache-2.0
`

// apacheParagraph is the stand-alone License paragraph every Apache-2.0 file
// paragraph refers to.
const apacheParagraph = `License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License");
 you may not use this file except in compliance with the License.
 You may obtain a copy of the License at
 .
     http://www.apache.org/licenses/LICENSE-2.0
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an "AS IS" BASIS,
 WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 See the License for the specific language governing permissions and
 limitations under the License.
 .
 On Debian systems, the complete text of the Apache License, Version 2.0
 can be found in "/usr/share/common-licenses/Apache-2.0"; the release
 archives carry it as LICENSE.
`

// copyright returns the Debian copyright file of bin: pgleader's paragraph,
// then, for every module bin links (its build information) and for the Go
// standard library, the copyright lines and license of its license file in the
// module cache, with the full text of every license but Apache-2.0 and the
// module's NOTICE, if any. A module whose license file is missing or not one
// of the licenses recognised here is an error: a release never ships without
// its notices.
func (r *release) copyright(bin string) ([]byte, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	env, err := goEnv(r.root, "GOMODCACHE", "GOROOT")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(copyrightHead)
	add := func(files, dir, comment string) error {
		text, notice, err := licenseFiles(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", files, err)
		}
		name := licenseName(text)
		if name == "" {
			return fmt.Errorf("%s: the license in %s is none of Apache-2.0, Expat, BSD-2-clause, BSD-3-clause, ISC, MPL-2.0: add it to licenseName", files, dir)
		}
		fmt.Fprintf(&b, "\nFiles: %s/*\nCopyright: %s\nLicense: %s\n", files, copyrightLines(text, files), name)
		if name != "Apache-2.0" {
			b.WriteString(indent(text))
		}
		c := comment
		if notice != "" {
			c += "\n.\nNOTICE:\n" + notice
		}
		fmt.Fprintf(&b, "Comment: %s", indent(c)[1:])
		return nil
	}
	if err := add("go", env["GOROOT"], "The Go standard library and runtime ("+bi.GoVersion+"), linked into the binary."); err != nil {
		return nil, err
	}
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		dir := filepath.Join(env["GOMODCACHE"], escapePath(m.Path)+"@"+m.Version)
		if err := add(d.Path, dir, "Go module "+m.Path+" "+m.Version+", linked into the binary."); err != nil {
			return nil, err
		}
	}
	b.WriteString("\n" + apacheParagraph)
	return []byte(b.String()), nil
}

func goEnv(root string, keys ...string) (map[string]string, error) {
	cmd := exec.Command("go", append([]string{"env"}, keys...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	vals := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(vals) != len(keys) {
		return nil, fmt.Errorf("go env %v: %q", keys, out)
	}
	env := map[string]string{}
	for i, k := range keys {
		env[k] = vals[i]
	}
	return env, nil
}

// escapePath is a module path as the module cache spells it: each upper-case
// letter as ! and its lower case.
func escapePath(p string) string {
	var b strings.Builder
	for _, c := range p {
		if unicode.IsUpper(c) {
			b.WriteByte('!')
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// licenseFiles returns the text of dir's license file and of its NOTICE file
// (empty when it has none).
func licenseFiles(dir string) (license, notice string, err error) {
	for _, pattern := range []string{"LICENSE*", "LICENCE*", "COPYING*", "License*", "license*"} {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range m {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
				b, err := os.ReadFile(f)
				if err != nil {
					return "", "", err
				}
				license = string(b)
				break
			}
		}
		if license != "" {
			break
		}
	}
	if license == "" {
		return "", "", fmt.Errorf("%w in %s", errNoLicense, dir)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "NOTICE")); err == nil {
		notice = string(b)
	}
	return license, notice, nil
}

// licenseName names text in the Debian copyright format's short names, or
// returns "" for a license it does not recognise.
func licenseName(text string) string {
	t := strings.Join(strings.Fields(text), " ")
	has := func(s string) bool { return strings.Contains(t, s) }
	switch {
	case has("Apache License") && has("Version 2.0"):
		return "Apache-2.0"
	case has("Mozilla Public License Version 2.0") || has("Mozilla Public License, version 2.0"):
		return "MPL-2.0"
	case has("Permission is hereby granted, free of charge"):
		return "Expat"
	case has("Permission to use, copy, modify, and/or distribute this software") ||
		has("Permission to use, copy, modify, and distribute this software"):
		return "ISC"
	case has("Redistribution and use in source and binary forms"):
		if has("Neither the name") || has("names of its contributors") || has("name of the copyright holder") {
			return "BSD-3-clause"
		}
		return "BSD-2-clause"
	}
	return ""
}

var copyrightLine = regexp.MustCompile(`(?im)^\s*(copyright\s+(\(c\)|©|\d{4}).*)$`)

// copyrightLines are the Copyright field of a paragraph: the license text's
// copyright lines, else its authors by name.
func copyrightLines(text, module string) string {
	var lines []string
	for _, m := range copyrightLine.FindAllStringSubmatch(text, -1) {
		l := strings.TrimSpace(m[1])
		if !strings.Contains(l, "[yyyy]") && !strings.Contains(l, "{yyyy}") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "the authors of " + module
	}
	return strings.Join(lines, "\n ")
}

// indent is text as the continuation lines of a field: each line after a
// space, an empty line as " .".
func indent(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			l = "."
		}
		b.WriteString(" " + l + "\n")
	}
	return b.String()
}
