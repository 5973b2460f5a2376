package model

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// sources are the Promela files, written next to each run's pan.
//
//go:embed *.pml
var sources embed.FS

// Search is how pan explores a model.
type Search int

const (
	// Exhaustive visits every reachable state (depth-first, states stored
	// compressed with -DCOLLAPSE): a pass is a proof within the run's bounds.
	Exhaustive Search = iota
	// Shortest searches breadth-first and stops at the first error: its trail is
	// a shortest one, the clearest story.
	Shortest
	// FirstFound searches depth-first and stops at the first error: for
	// counterexamples too deep for a breadth-first search to reach in time.
	FirstFound
	// Liveness looks for an acceptance cycle of the model's ltl formula (the
	// model is built with LIVENESS): a run in which time passes and yet no gate
	// stays open.
	Liveness
)

// Check is one run of a model.
type Check struct {
	// Name says which check it is: "lock/safety", "mutation/no-guard-wait", ...
	Name string
	// Model is the Promela file: "lock.pml" or "lease.pml".
	Model string
	// Defines are the preprocessor definitions, without -D: parameters
	// ("MAXF=1"), mutations, fixes.
	Defines []string
	// Search is how pan explores the model.
	Search Search
	// Want is empty when the run must find nothing; otherwise the property its
	// counterexample must break: "S1", "S3", "S5" or "liveness".
	Want string
	// Reach lists the transitions (REACHED markers) an exhaustive run must take
	// at least once: the model's faults, so that a pass is not a pass because a
	// fault could never happen.
	Reach []string
	// About says in a line what the check shows.
	About string
	// Slow marks a check that takes minutes: run only when PGLEADER_MODEL_SLOW
	// is set.
	Slow bool
}

// Result is what a run found.
type Result struct {
	// States and Transitions are pan's counts ("states, stored" and
	// "transitions (= stored+matched)").
	States, Transitions int64
	// Depth is the deepest step pan reached.
	Depth int
	// MemoryMB is pan's "total actual memory usage".
	MemoryMB float64
	// Pan is pan's own elapsed time; Elapsed the whole check's (spin, the C
	// compiler, pan, and the replay of a trail).
	Pan, Elapsed time.Duration
	// Errors is pan's error count: a counterexample was found when it is above 0.
	Errors int
	// Reached lists the REACHED markers the run took.
	Reached []string
	// Broken is the property the counterexample breaks ("S5", "liveness", ...),
	// empty when there is none.
	Broken string
	// Story is the counterexample in the protocol's words, one event a line,
	// each prefixed with its model time ("t=3 B claim_scopes: ...").
	Story []string
	// Command runs the check by hand, from a directory holding the .pml files.
	Command string
}

// flags are the spin, cc and pan arguments of a check.
func (c Check) flags() (spin, cc, pan []string) {
	for _, d := range c.Defines {
		spin = append(spin, "-D"+d)
	}
	cc = []string{"-w", "-o", "pan", "-DMEMLIM=2048"}
	pan = []string{"-m200000"}
	switch c.Search {
	case Exhaustive:
		cc = append(cc, "-O1", "-DSAFETY", "-DCOLLAPSE")
		pan = append(pan, "-w22")
	case Shortest:
		cc = append(cc, "-O0", "-DSAFETY", "-DBFS")
		pan = append(pan, "-w20")
	case FirstFound:
		cc = append(cc, "-O0", "-DSAFETY", "-DCOLLAPSE")
		pan = append(pan, "-w20")
	case Liveness:
		spin = append(spin, "-DLIVENESS")
		cc = append(cc, "-O1", "-DCOLLAPSE")
		pan = append(pan, "-a", "-w20")
	}
	return spin, append(cc, "pan.c"), pan
}

// Run runs the check in work, an empty directory it may fill: spin writes the
// verifier there, a C compiler builds it, pan searches, and spin replays the
// trail of a counterexample into the story.
func (c Check) Run(ctx context.Context, work string) (Result, error) {
	start := time.Now()
	var r Result
	if err := writeSources(work); err != nil {
		return r, err
	}
	spinArgs, ccArgs, panArgs := c.flags()
	r.Command = fmt.Sprintf("spin %s && gcc %s && ./pan %s",
		strings.Join(append(append([]string{"-a"}, spinArgs...), c.Model), " "),
		strings.Join(ccArgs, " "), strings.Join(panArgs, " "))
	if _, err := run(ctx, work, "spin", append(append([]string{"-a"}, spinArgs...), c.Model)...); err != nil {
		return r, err
	}
	if _, err := run(ctx, work, "gcc", ccArgs...); err != nil {
		return r, err
	}
	out, err := run(ctx, work, "./pan", panArgs...)
	if err != nil && len(out) == 0 {
		return r, err
	}
	if err := r.parsePan(out); err != nil {
		return r, fmt.Errorf("%s: %w\n%s", c.Name, err, out)
	}
	if r.Errors > 0 {
		trail, err := run(ctx, work, "spin", append(append([]string{"-t", "-T"}, spinArgs...), c.Model)...)
		if err != nil && len(trail) == 0 {
			return r, err
		}
		r.Story, r.Broken = Story(trail)
		if r.Broken == "" && bytes.Contains(out, []byte("acceptance cycle")) {
			r.Broken = "liveness"
		}
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

func writeSources(dir string) error {
	names, err := sources.ReadDir(".")
	if err != nil {
		return err
	}
	for _, n := range names {
		b, err := sources.ReadFile(n.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// run runs a command in dir and returns its combined output; an error names the
// command and carries the output's tail.
func run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := out
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return out, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail)
	}
	return out, nil
}

var (
	panErrors  = regexp.MustCompile(`depth reached (\d+), errors: (\d+)`)
	panStates  = regexp.MustCompile(`(?m)^\s*(\d+) states, stored`)
	panTrans   = regexp.MustCompile(`(?m)^\s*(\d+) transitions \(= (?:stored|visited)\+matched\)`)
	panMemory  = regexp.MustCompile(`(?m)^\s*([\d.]+)\s+total actual memory usage`)
	panElapsed = regexp.MustCompile(`pan: elapsed time ([\d.e+]+) seconds`)
	panReached = regexp.MustCompile(`(?m)^REACHED (\w+)$`)
)

// parsePan reads pan's report.
func (r *Result) parsePan(out []byte) error {
	s := string(out)
	if strings.Contains(s, "pan: out of memory") || strings.Contains(s, "memory limit") {
		return errors.New("pan ran out of memory (MEMLIM)")
	}
	m := panErrors.FindStringSubmatch(s)
	if m == nil {
		return errors.New("no \"errors:\" line in pan's output")
	}
	r.Depth, _ = strconv.Atoi(m[1])
	r.Errors, _ = strconv.Atoi(m[2])
	if m := panStates.FindStringSubmatch(s); m != nil {
		r.States, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := panTrans.FindStringSubmatch(s); m != nil {
		r.Transitions, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := panMemory.FindStringSubmatch(s); m != nil {
		r.MemoryMB, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := panElapsed.FindStringSubmatch(s); m != nil {
		secs, _ := strconv.ParseFloat(m[1], 64)
		r.Pan = time.Duration(secs * float64(time.Second))
	}
	for _, m := range panReached.FindAllStringSubmatch(s, -1) {
		r.Reached = append(r.Reached, m[1])
	}
	return nil
}

var (
	// storyLine: the model's own printf lines (spin's replay prints more).
	storyLine = regexp.MustCompile(`^(@tick|[ABC]('s)? |FAULT |VIOLATION |a write |server |another |the |model bound|<<<<<START OF CYCLE>>>>>)`)
	// relTime: "{t+3}", a time relative to the line's own.
	relTime  = regexp.MustCompile(`\{t\+(\d+)\}`)
	brokenRe = regexp.MustCompile(`^VIOLATION (\S+?):`)
)

// Story turns spin's replay of a trail (spin -t -T) into the counterexample in
// the protocol's words: each event with its model time, up to the violation.
// It returns the property broken ("S5", ...; empty for an acceptance cycle,
// whose repeating part starts after a line saying so).
func Story(replay []byte) (story []string, broken string) {
	t := 0
	for _, line := range strings.Split(string(replay), "\n") {
		line = strings.TrimRight(line, " \r")
		if !storyLine.MatchString(line) {
			continue
		}
		switch {
		case line == "@tick":
			t++
			continue
		case strings.HasPrefix(line, "<<<<<START OF CYCLE"):
			story = append(story, fmt.Sprintf("t=%d (from here the run repeats forever, time passing)", t))
			continue
		}
		line = relTime.ReplaceAllStringFunc(line, func(s string) string {
			d, _ := strconv.Atoi(relTime.FindStringSubmatch(s)[1])
			return fmt.Sprintf("t=%d", t+d)
		})
		story = append(story, fmt.Sprintf("t=%d %s", t, line))
		if m := brokenRe.FindStringSubmatch(line); m != nil {
			return story, m[1]
		}
	}
	return story, ""
}
