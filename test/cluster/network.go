package cluster

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
)

// network gives every pod its own network namespace with one address on a
// bridge: connections come from the pod's own address, Redis's protected
// mode and passwords behave as on a real pod network, and a pod can be cut
// off by taking its link down. The addresses exist only inside the
// namespaces this cluster made and on its bridge; nothing is routed further.
type network struct {
	bridge  string
	prefix  netip.Prefix
	gateway netip.Addr

	mu   sync.Mutex
	next netip.Addr
	free []netip.Addr
	used map[string]netip.Addr // netns name → address
}

func newNetwork(bridge string, prefix netip.Prefix) (*network, error) {
	prefix = prefix.Masked()
	gw := prefix.Addr().Next()
	n := &network{bridge: bridge, prefix: prefix, gateway: gw, next: gw.Next(), used: map[string]netip.Addr{}}
	// A bridge left over by a crashed run is removed first.
	_ = run("ip", "link", "del", bridge)
	if err := run("ip", "link", "add", bridge, "type", "bridge"); err != nil {
		return nil, fmt.Errorf("creating bridge %s (the process-backed node needs root and iproute2): %w", bridge, err)
	}
	if err := run("ip", "addr", "add", fmt.Sprintf("%s/%d", gw, prefix.Bits()), "dev", bridge); err != nil {
		n.close()
		return nil, err
	}
	if err := run("ip", "link", "set", bridge, "up"); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

// Gateway is the bridge's own address, the node's address on the pod network.
func (n *network) Gateway() string { return n.gateway.String() }

// allocate hands out addresses never used before while the range lasts,
// and only then the longest-freed one. A pod recreated under the same name
// must not get its predecessor's address: the host and the other pods still
// hold an ARP entry for it pointing at the deleted veth, and would not reach
// the new pod (probes, replication) until that entry expires.
func (n *network) allocate() (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := n.next
	if n.prefix.Contains(a) && n.prefix.Contains(a.Next()) {
		n.next = a.Next()
		return a, nil
	}
	if len(n.free) > 0 {
		a := n.free[0]
		n.free = n.free[1:]
		return a, nil
	}
	return netip.Addr{}, fmt.Errorf("pod network %s is full", n.prefix)
}

// podNetwork is the namespace and link of one pod.
type podNetwork struct {
	netns    string // name under /var/run/netns
	hostVeth string
	ip       netip.Addr
}

// Path is the namespace file to join.
func (p *podNetwork) Path() string { return "/var/run/netns/" + p.netns }

// setup creates the pod's namespace, a veth pair into it, and its address.
func (n *network) setup(id string) (*podNetwork, error) {
	ip, err := n.allocate()
	if err != nil {
		return nil, err
	}
	p := &podNetwork{netns: "cacheops-" + id, hostVeth: "cop" + id, ip: ip}
	peer := "cip" + id
	_ = run("ip", "netns", "del", p.netns)
	_ = run("ip", "link", "del", p.hostVeth)
	steps := [][]string{
		{"ip", "netns", "add", p.netns},
		{"ip", "link", "add", p.hostVeth, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", peer, "netns", p.netns},
		{"ip", "-n", p.netns, "link", "set", peer, "name", "eth0"},
		{"ip", "-n", p.netns, "addr", "add", fmt.Sprintf("%s/%d", ip, n.prefix.Bits()), "dev", "eth0"},
		{"ip", "-n", p.netns, "link", "set", "eth0", "up"},
		{"ip", "-n", p.netns, "link", "set", "lo", "up"},
		{"ip", "-n", p.netns, "route", "add", "default", "via", n.gateway.String()},
		{"ip", "link", "set", p.hostVeth, "master", n.bridge},
		{"ip", "link", "set", p.hostVeth, "up"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			n.teardown(p)
			return nil, err
		}
	}
	n.mu.Lock()
	n.used[p.netns] = ip
	n.mu.Unlock()
	return p, nil
}

// teardown removes the pod's namespace and link and frees its address.
func (n *network) teardown(p *podNetwork) {
	_ = run("ip", "link", "del", p.hostVeth)
	_ = run("ip", "netns", "del", p.netns)
	// Forget the MAC of the gone pod, for when its address comes back.
	_ = run("ip", "neigh", "flush", "to", p.ip.String(), "dev", n.bridge)
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.used[p.netns]; ok {
		delete(n.used, p.netns)
		n.free = append(n.free, p.ip)
	}
}

// setLink takes the pod's link down (a partition) or up again.
func (n *network) setLink(p *podNetwork, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return run("ip", "link", "set", p.hostVeth, state)
}

func (n *network) close() {
	n.mu.Lock()
	names := make([]string, 0, len(n.used))
	for ns := range n.used {
		names = append(names, ns)
	}
	n.mu.Unlock()
	for _, ns := range names {
		_ = run("ip", "netns", "del", ns)
	}
	_ = run("ip", "link", "del", n.bridge)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
