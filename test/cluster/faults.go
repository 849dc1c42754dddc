package cluster

import (
	"context"
	"fmt"
	"syscall"
)

// Fault injection for tests. Pods are named by namespace and name; the
// container defaults to the pod's first one.

func (c *Cluster) findContainer(ns, pod, container string) (*podRuntime, *containerRuntime, error) {
	c.mu.Lock()
	nodes := make([]*processNode, 0, len(c.nodes))
	for _, n := range c.nodes {
		nodes = append(nodes, n)
	}
	c.mu.Unlock()
	for _, n := range nodes {
		if r, ct, err := n.provider.container(ns, pod, container); err == nil {
			return r, ct, nil
		}
	}
	return nil, nil, fmt.Errorf("pod %s/%s (container %q) runs on no node of this cluster", ns, pod, container)
}

// PID is the process ID of a container's current run; it changes when the
// container restarts.
func (c *Cluster) PID(ns, pod, container string) (int, error) {
	r, ct, err := c.findContainer(ns, pod, container)
	if err != nil {
		return 0, err
	}
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	if ct.state.Running == nil {
		return 0, fmt.Errorf("container %s of %s/%s is not running", ct.spec.Name, ns, pod)
	}
	return ct.pid, nil
}

func (c *Cluster) signal(ns, pod, container string, sig syscall.Signal) error {
	pid, err := c.PID(ns, pod, container)
	if err != nil {
		return err
	}
	return syscall.Kill(-pid, sig)
}

// KillContainer kills a container's process (SIGKILL); the node restarts it
// as the pod's restartPolicy says.
func (c *Cluster) KillContainer(ns, pod, container string) error {
	return c.signal(ns, pod, container, syscall.SIGKILL)
}

// Freeze stops a container's process (SIGSTOP): it holds its connections
// but answers nothing, like a process stuck in a long pause.
func (c *Cluster) Freeze(ns, pod, container string) error {
	return c.signal(ns, pod, container, syscall.SIGSTOP)
}

// Thaw resumes a frozen container (SIGCONT).
func (c *Cluster) Thaw(ns, pod, container string) error {
	return c.signal(ns, pod, container, syscall.SIGCONT)
}

// Partition cuts a pod off the network: its link goes down, so neither
// peers, clients nor the operator reach it, and it reaches nobody.
func (c *Cluster) Partition(ns, pod string) error {
	r, _, err := c.findContainer(ns, pod, "")
	if err != nil {
		return err
	}
	return c.net.setLink(r.net, false)
}

// Reconnect undoes Partition.
func (c *Cluster) Reconnect(ns, pod string) error {
	r, _, err := c.findContainer(ns, pod, "")
	if err != nil {
		return err
	}
	return c.net.setLink(r.net, true)
}

// StopNode kills every process of a node at once and stops its controllers,
// as a machine that loses power: the Node stays and turns NotReady once its
// lease expires.
func (c *Cluster) StopNode(name string) error {
	c.mu.Lock()
	n, ok := c.nodes[name]
	delete(c.nodes, name)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("node %s is not running", name)
	}
	n.stop(false)
	return nil
}

// StartNode starts a configured node (again); pods bound to it start anew.
func (c *Cluster) StartNode(ctx context.Context, name string) error {
	var opts *NodeOptions
	for i := range c.opts.Nodes {
		if c.opts.Nodes[i].Name == name {
			opts = &c.opts.Nodes[i]
		}
	}
	if opts == nil {
		return fmt.Errorf("node %s is not in Options.Nodes", name)
	}
	c.mu.Lock()
	_, running := c.nodes[name]
	c.mu.Unlock()
	if running {
		return fmt.Errorf("node %s is already running", name)
	}
	n, err := c.startNode(ctx, *opts)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[name] = n
	c.mu.Unlock()
	return nil
}
