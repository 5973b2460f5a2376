package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// LabTag is the build tag of a lab build of pgleader: its `node` command has the
// hidden --test-* fault hooks (pause before a write, skip the fence) that the
// lab's tests and chaos scenarios drive. The shipped binary is built without it.
const LabTag = "pgleader_lab"

// Build compiles a lab build of the pgleader command (tag LabTag) into a new
// temporary directory and returns the binary's path and a function that removes
// the directory. With race, the binary is built with the race detector, so the
// engine's goroutines are checked in the child processes too. For test binaries;
// it needs the go tool and the module's source.
func Build(race bool) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "pgleader-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "pgleader")
	args := []string{"build", "-tags", LabTag, "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "github.com/pgleader/pgleader/cmd/pgleader")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go build pgleader: %v\n%s", err, out)
	}
	return bin, cleanup, nil
}
