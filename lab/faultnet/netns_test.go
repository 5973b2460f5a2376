package faultnet

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNamespacePartition: a process inside the namespace reaches an echo server on
// loopback through a proxy on the host end; Cut makes the path silent (the
// connection attempt times out instead of being refused or reset); Heal restores it.
func TestNamespacePartition(t *testing.T) {
	if why := NamespaceSupport(); why != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("network namespaces unavailable in CI: %s (CI runs as root with iproute2 and nftables)", why)
		}
		t.Skip("skipped: " + why)
	}
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				c.Write([]byte("echo " + line))
			}()
		}
	}()
	ns, err := NewNamespace(7)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
		if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), ns.Name) {
			t.Errorf("namespace %s still exists after Close", ns.Name)
		}
	}()
	p, err := NewOn("ns-test", ns.HostIP+":0", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	host, port, _ := net.SplitHostPort(p.Addr())
	if host != ns.HostIP {
		t.Fatalf("proxy listens on %s, want %s", p.Addr(), ns.HostIP)
	}
	// bash's /dev/tcp from inside the namespace, bounded by timeout(1).
	talk := func() (string, error) {
		script := "exec 3<>/dev/tcp/" + host + "/" + port + " && echo hi >&3 && read -r line <&3 && echo \"$line\""
		out, err := exec.Command("ip", append(ns.Exec()[1:], "timeout", "1", "bash", "-c", script)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := talk(); err != nil || out != "echo hi" {
		t.Fatalf("before the cut: %q, %v", out, err)
	}
	if err := ns.Cut(); err != nil {
		t.Fatal(err)
	}
	out, err := talk()
	var ee *exec.ExitError
	if err == nil || !errors.As(err, &ee) || ee.ExitCode() != 124 {
		t.Fatalf("while cut: want a silent timeout (exit 124), got %q, %v", out, err)
	}
	if err := ns.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Heal(); err != nil {
		t.Fatalf("second Heal: %v", err)
	}
	if out, err := talk(); err != nil || out != "echo hi" {
		t.Fatalf("after Heal: %q, %v", out, err)
	}
}
