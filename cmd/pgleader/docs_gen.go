//go:build pgleader_docs

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// docsCommands: a docs build (-tags pgleader_docs, which lab/release builds to
// package a release) has gen-docs, which writes the man pages and shell
// completions of the production command tree — this build's, without the lab
// tag. cobra/doc and go-md2man stay out of the shipped binary.
func (a *app) docsCommands() []*cobra.Command {
	var (
		dir    string
		source string
		date   int64
	)
	cmd := &cobra.Command{
		Use:    "gen-docs --dir DIR",
		Short:  "Write the man pages (DIR/man1) and shell completions (DIR/completions)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			root := cmd.Root()
			root.DisableAutoGenTag = true // no generation date in the pages
			man := filepath.Join(dir, "man1")
			comp := filepath.Join(dir, "completions")
			for _, d := range []string{man, comp} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			t := time.Unix(date, 0).UTC()
			if err := doc.GenManTree(root, &doc.GenManHeader{Section: "1", Date: &t, Source: source, Manual: "pgleader manual"}, man); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			for name, gen := range map[string]func(f *os.File) error{
				"pgleader.bash": func(f *os.File) error { return root.GenBashCompletionV2(f, true) },
				"_pgleader":     func(f *os.File) error { return root.GenZshCompletion(f) },
				"pgleader.fish": func(f *os.File) error { return root.GenFishCompletion(f, true) },
			} {
				f, err := os.Create(filepath.Join(comp, name))
				if err != nil {
					return err
				}
				if err := gen(f); err != nil {
					f.Close()
					return fmt.Errorf("completion %s: %w", name, err)
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "write into `DIR`")
	f.StringVar(&source, "source", "pgleader", "the pages' source line, e.g. \"pgleader 1.0.0-rc.1\"")
	f.Int64Var(&date, "date", 0, "the pages' date, in Unix seconds (the commit's, for the same bytes on every build)")
	_ = cmd.MarkFlagRequired("dir")
	return []*cobra.Command{cmd}
}
