package probe

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ClusterView is what one node of a sharded cluster says about the cluster
// (CLUSTER INFO and CLUSTER NODES): the truth the sharded planner works
// from, never what the operator remembers.
type ClusterView struct {
	// State is cluster_state: ok or fail.
	State string
	// SlotsAssigned is cluster_slots_assigned: slots some master serves in
	// this node's view.
	SlotsAssigned int
	// KnownNodes is cluster_known_nodes.
	KnownNodes int
	// Myself is this node's own line.
	Myself ClusterNode
	// Nodes are every node this one knows, itself included, by ID.
	Nodes []ClusterNode
	// MigratingKeys is CLUSTER COUNTKEYSINSLOT of each slot this node
	// migrates (at most MaxCountedSlots of them): a slot may be given to
	// its new owner only once it is 0.
	MigratingKeys map[int]int
	// Parameters are the node's cluster parameters the operator derives
	// from spec (ClusterParameters), by name, as CONFIG GET reports them;
	// a parameter the node does not report is missing.
	Parameters map[string]string
}

// ClusterParameters are the parameters of a cluster node that follow
// spec.highAvailability (renderer.ClusterParameters): the probe reads them
// so a change is set live on the nodes that run another value.
var ClusterParameters = []string{"cluster-node-timeout", "cluster-replica-no-failover"}

// MaxCountedSlots bounds the COUNTKEYSINSLOT a probe sends: the planner
// never has more slots migrating at once.
const MaxCountedSlots = 1024

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode struct {
	ID string
	// IP is the address the node announces (cluster-announce-ip: its pod
	// IP); empty while it has none (noaddr).
	IP string
	// Master is true for a master, false for a replica.
	Master bool
	// MasterID is the node a replica follows; empty for a master.
	MasterID string
	// Failed: the node is flagged fail (the majority agreed it is down)
	// or pfail (this node cannot reach it).
	Failed bool
	// Handshake: a node being met, not yet known by its ID.
	Handshake bool
	// Slots are the slot ranges the node serves, inclusive, sorted.
	Slots []SlotRange
	// Migrating or importing slots are marked on the line ("[5460->-id]");
	// Moving counts them.
	Moving int
	// Migrating are the slots this node gives away, by the node taking
	// them ("[5460->-id]"); Importing the slots it takes, by the node
	// giving them ("[5460-<-id]"). Redis shows both on its own line only.
	Migrating map[int]string
	Importing map[int]string
}

// SlotRange is the slots from Start to End, both included.
type SlotRange struct{ Start, End int }

func (r SlotRange) String() string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return fmt.Sprintf("%d-%d", r.Start, r.End)
}

// Len is the number of slots in the range.
func (r SlotRange) Len() int { return r.End - r.Start + 1 }

// signature is the view without what changes on every gossip (ping and
// pong times, epochs): it changes only when the topology does.
func (v *ClusterView) signature() string {
	if v == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d %d;", v.State, v.SlotsAssigned, v.KnownNodes)
	for _, n := range v.Nodes {
		fmt.Fprintf(&b, "%s %s %t %s %t %t %v %d %v %v;", n.ID, n.IP, n.Master, n.MasterID, n.Failed, n.Handshake, n.Slots, n.Moving, n.Migrating, n.Importing)
	}
	fmt.Fprintf(&b, "%v %v", v.MigratingKeys, v.Parameters)
	return b.String()
}

// probeCluster reads CLUSTER INFO, CLUSTER NODES and the cluster
// parameters on the pod's connection, in one round trip.
func probeCluster(ctx context.Context, c *conn, timeout, period time.Duration) (*ClusterView, error) {
	out, err := c.pipeline(ctx, clusterCommands, timeout, period)
	if err != nil {
		return nil, fmt.Errorf("CLUSTER INFO, CLUSTER NODES, CONFIG GET: %w", err)
	}
	v, err := ParseClusterView(out[0], out[1])
	if err != nil {
		return nil, err
	}
	v.Parameters = make(map[string]string, len(ClusterParameters))
	for _, reply := range out[2:] {
		if name, value, ok := strings.Cut(strings.TrimSuffix(reply, "\n"), "\n"); ok {
			v.Parameters[name] = value
		}
	}
	slots := make([]int, 0, len(v.Myself.Migrating))
	for s := range v.Myself.Migrating {
		slots = append(slots, s)
	}
	sort.Ints(slots)
	slots = slots[:min(len(slots), MaxCountedSlots)]
	if len(slots) == 0 {
		return v, nil
	}
	cmds := make([][]byte, len(slots))
	for i, s := range slots {
		cmds[i] = encodeCommand("CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(s))
	}
	counts, err := c.pipeline(ctx, cmds, timeout, period)
	if err != nil {
		return nil, fmt.Errorf("CLUSTER COUNTKEYSINSLOT: %w", err)
	}
	v.MigratingKeys = make(map[int]int, len(slots))
	for i, s := range slots {
		v.MigratingKeys[s], _ = strconv.Atoi(counts[i])
	}
	return v, nil
}

// clusterCommands are what a probe of a cluster node sends: CLUSTER
// INFO, CLUSTER NODES, then one CONFIG GET per cluster parameter (one name
// each, which every version answers).
var clusterCommands = func() [][]byte {
	cmds := [][]byte{encodeCommand("CLUSTER", "INFO"), encodeCommand("CLUSTER", "NODES")}
	for _, p := range ClusterParameters {
		cmds = append(cmds, encodeCommand("CONFIG", "GET", p))
	}
	return cmds
}()

// ParseClusterView reads the answers of CLUSTER INFO and CLUSTER NODES.
func ParseClusterView(info, nodes string) (*ClusterView, error) {
	v := &ClusterView{}
	for _, line := range strings.Split(info, "\n") {
		k, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "cluster_state":
			v.State = val
		case "cluster_slots_assigned":
			v.SlotsAssigned, _ = strconv.Atoi(val)
		case "cluster_known_nodes":
			v.KnownNodes, _ = strconv.Atoi(val)
		}
	}
	found := false
	for _, line := range strings.Split(nodes, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		n, myself, err := parseNodeLine(line)
		if err != nil {
			return nil, err
		}
		if myself {
			v.Myself, found = n, true
		}
		v.Nodes = append(v.Nodes, n)
	}
	if !found {
		return nil, fmt.Errorf("CLUSTER NODES has no line flagged myself")
	}
	sort.Slice(v.Nodes, func(i, j int) bool { return v.Nodes[i].ID < v.Nodes[j].ID })
	return v, nil
}

// parseNodeLine reads "<id> <ip:port@cport> <flags> <master> <ping> <pong>
// <epoch> <link> <slot>...".
func parseNodeLine(line string) (ClusterNode, bool, error) {
	f := strings.Fields(line)
	if len(f) < 8 {
		return ClusterNode{}, false, fmt.Errorf("CLUSTER NODES line %q has %d fields, want at least 8", line, len(f))
	}
	n := ClusterNode{ID: f[0]}
	addr, _, _ := strings.Cut(f[1], "@")
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		n.IP = strings.Trim(addr[:i], "[]")
	}
	myself := false
	for _, flag := range strings.Split(f[2], ",") {
		switch flag {
		case "myself":
			myself = true
		case "master":
			n.Master = true
		case "fail", "fail?":
			n.Failed = true
		case "handshake":
			n.Handshake = true
		case "noaddr":
			n.IP = ""
		}
	}
	if f[3] != "-" {
		n.MasterID = f[3]
	}
	for _, s := range f[8:] {
		if strings.HasPrefix(s, "[") {
			n.Moving++
			parseMoving(&n, s)
			continue
		}
		a, b, isRange := strings.Cut(s, "-")
		start, err := strconv.Atoi(a)
		if err != nil {
			return ClusterNode{}, false, fmt.Errorf("CLUSTER NODES slot %q: %w", s, err)
		}
		end := start
		if isRange {
			if end, err = strconv.Atoi(b); err != nil {
				return ClusterNode{}, false, fmt.Errorf("CLUSTER NODES slot %q: %w", s, err)
			}
		}
		n.Slots = append(n.Slots, SlotRange{start, end})
	}
	sort.Slice(n.Slots, func(i, j int) bool { return n.Slots[i].Start < n.Slots[j].Start })
	return n, myself, nil
}

// parseMoving reads a migrating ("[5460->-id]") or importing
// ("[5460-<-id]") marker.
func parseMoving(n *ClusterNode, s string) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if slot, id, ok := strings.Cut(s, "->-"); ok {
		if i, err := strconv.Atoi(slot); err == nil {
			if n.Migrating == nil {
				n.Migrating = map[int]string{}
			}
			n.Migrating[i] = id
		}
		return
	}
	if slot, id, ok := strings.Cut(s, "-<-"); ok {
		if i, err := strconv.Atoi(slot); err == nil {
			if n.Importing == nil {
				n.Importing = map[int]string{}
			}
			n.Importing[i] = id
		}
	}
}
