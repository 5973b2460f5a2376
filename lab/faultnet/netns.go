package faultnet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Namespace is a network namespace of our own, joined to the host's by a veth pair,
// for a true silent partition: Cut installs nftables rules inside the namespace that
// drop every packet in both directions (no FIN, no RST, no ICMP), as a dead switch
// or a firewall change would. A process runs inside it through Exec's prefix and
// reaches the host end, HostIP, where a proxy listens (NewOn) and forwards to
// PostgreSQL on loopback. Nothing leaves the host: both ends are addresses of the
// RFC 2544 benchmarking range 198.18.0.0/15 on interfaces this package creates, and
// Close deletes them.
//
// It needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root), iproute2 (`ip`) and nftables
// (`nft`); NamespaceSupport says whether this machine has them.
type Namespace struct {
	Name   string // netns name: pgleader-<pid>-<k>
	HostIP string // host end of the veth pair
	PeerIP string // the namespace's end
	hostIf string
}

const (
	nsPrefix   = "pgleader-"
	chaosTable = "pgleader_partition"
)

// NamespaceSupport returns "" when namespaces can be made here, else why not, in
// the words a verdict shows ("needs CAP_NET_ADMIN …").
func NamespaceSupport() string {
	if os.Geteuid() != 0 {
		return "needs CAP_NET_ADMIN (run as root)"
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "needs iproute2 and nftables (apt-get install -y iproute2 nftables): " + tool + " not found"
		}
	}
	probe := fmt.Sprintf("%s%d-probe", nsPrefix, os.Getpid())
	if err := run("ip", "netns", "add", probe); err != nil {
		return "needs CAP_NET_ADMIN: " + err.Error()
	}
	defer run("ip", "netns", "del", probe)
	// Both ends inside the probe namespace: deleting it removes them.
	veth := fmt.Sprintf("plp%d", os.Getpid()%100000)
	if err := run("ip", "-n", probe, "link", "add", veth, "type", "veth", "peer", "name", veth+"b"); err != nil {
		return "needs veth support in the kernel: " + err.Error()
	}
	if err := run("ip", "netns", "exec", probe, "nft", "add", "table", "inet", chaosTable); err != nil {
		return "needs nftables in the kernel: " + err.Error()
	}
	return ""
}

// NewNamespace creates namespace number k of this process with its veth pair up and
// addressed. Leftovers of processes that no longer exist are removed first.
func NewNamespace(k int) (*Namespace, error) {
	removeOrphans()
	pid := os.Getpid()
	// A /30 per namespace, chosen by pid and k so concurrent runs do not collide.
	slot := (pid*16 + k) % (1 << 15)
	base := 198<<24 | 18<<16 | slot<<2
	ip := func(host int) string {
		v := base + host
		return fmt.Sprintf("%d.%d.%d.%d", v>>24&255, v>>16&255, v>>8&255, v&255)
	}
	n := &Namespace{
		Name:   fmt.Sprintf("%s%d-%d", nsPrefix, pid, k),
		HostIP: ip(1), PeerIP: ip(2),
		hostIf: fmt.Sprintf("plh%d.%d", pid%100000, k),
	}
	peerIf := fmt.Sprintf("pln%d.%d", pid%100000, k)
	steps := [][]string{
		{"ip", "netns", "add", n.Name},
		{"ip", "-n", n.Name, "link", "set", "lo", "up"},
		{"ip", "link", "add", n.hostIf, "type", "veth", "peer", "name", peerIf},
		{"ip", "link", "set", peerIf, "netns", n.Name},
		{"ip", "addr", "add", n.HostIP + "/30", "dev", n.hostIf},
		{"ip", "link", "set", n.hostIf, "up"},
		{"ip", "-n", n.Name, "addr", "add", n.PeerIP + "/30", "dev", peerIf},
		{"ip", "-n", n.Name, "link", "set", peerIf, "up"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			n.Close()
			return nil, fmt.Errorf("faultnet: namespace %s: %w", n.Name, err)
		}
	}
	return n, nil
}

// Exec returns the command prefix that runs a program inside the namespace.
func (n *Namespace) Exec() []string { return []string{"ip", "netns", "exec", n.Name} }

// Cut drops every packet entering or leaving the namespace, silently.
func (n *Namespace) Cut() error {
	rules := "table inet " + chaosTable + ` {
	chain in { type filter hook input priority -300; policy drop; }
	chain out { type filter hook output priority -300; policy drop; }
}
`
	cmd := exec.Command("ip", "netns", "exec", n.Name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("faultnet: cut %s: %v: %s", n.Name, err, bytes.TrimSpace(out))
	}
	return nil
}

// Heal removes the drop rules; connections that survived resume.
func (n *Namespace) Heal() error {
	err := run("ip", "netns", "exec", n.Name, "nft", "delete", "table", "inet", chaosTable)
	if err != nil && strings.Contains(err.Error(), "No such file") {
		return nil // not cut
	}
	return err
}

// Close deletes the namespace and its veth pair. It is idempotent.
func (n *Namespace) Close() error {
	_ = run("ip", "link", "del", n.hostIf)
	if err := run("ip", "netns", "del", n.Name); err != nil && !strings.Contains(err.Error(), "No such file") {
		return err
	}
	return nil
}

// removeOrphans deletes namespaces (and with them their veth pairs) left by runs
// whose process is gone, e.g. killed with SIGKILL.
func removeOrphans() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, nsPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		_ = run("ip", "netns", "del", name)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
