package lab_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/pgleader/pgleader/lab/pgbouncer"
)

func TestProbe(t *testing.T) {
	dsn := "postgres://postgres@127.0.0.1:55432/topprobe"
	b, via, err := pgbouncer.Front(context.Background(), dsn, "transaction", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	os.WriteFile("/tmp/lp/via", []byte(via), 0o644)
	var nodes []*exec.Cmd
	for _, id := range []string{"n1", "n2", "n3"} {
		c := exec.Command("/tmp/pgl", "node", "--dsn", via, "--mode", "lease", "--id", id, "--scope", "billing", "--scope", "reports", "--log-level", "warn")
		c.Start()
		nodes = append(nodes, c)
	}
	time.Sleep(30 * time.Second)
	for _, c := range nodes {
		c.Process.Signal(os.Interrupt)
		c.Wait()
	}
	fmt.Println("done")
}
