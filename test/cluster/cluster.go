package cluster

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options configures a cluster.
type Options struct {
	// Dir holds the cluster's state: certificates, etcd data, logs, volumes.
	Dir string
	// BinDir holds the control-plane binaries built by `make tools`.
	BinDir string
	// CRDDirectories are installed once the API server is up.
	CRDDirectories []string
	// Nodes to start; default one node "node-a" in zone "zone-a".
	Nodes []NodeOptions
	// Images maps container images to local programs; default DefaultImages.
	Images []Image
	// PodCIDR is the pod network; default 10.244.0.0/16. It exists only on
	// this cluster's bridge and inside the namespaces it creates.
	PodCIDR string
	// Bridge names the pod network's bridge; default "cacheops0".
	Bridge string
	// ControlPlaneOnly starts no nodes, no pod network and no provisioner.
	ControlPlaneOnly bool
	// VolumeRefreshPeriod is how often a node brings its running pods'
	// configMap, secret, projected and downwardAPI volumes up to date, as
	// the kubelet does on its sync loop (up to about a minute there);
	// default DefaultVolumeRefreshPeriod.
	VolumeRefreshPeriod time.Duration
	// NodeMonitorGracePeriod is how long kube-controller-manager waits for
	// a node's heartbeat before it marks the node NotReady and evicts its
	// pods; default DefaultNodeMonitorGracePeriod, short so that tests of
	// a lost node end quickly. The nodes renew their lease every 10 s, so
	// on a machine loaded enough to delay a renewal (hundreds of pods on
	// two cores) the default marks healthy nodes NotReady: such runs set
	// Kubernetes' own default, 50 s.
	NodeMonitorGracePeriod time.Duration
	// ControllerManagerQPS is the requests a second each controller of
	// kube-controller-manager may send (--kube-api-qps; burst twice
	// that); default DefaultControllerManagerQPS. Kubernetes' own
	// default is 20.
	ControllerManagerQPS int
}

// DefaultNodeMonitorGracePeriod is Options.NodeMonitorGracePeriod's
// default.
const DefaultNodeMonitorGracePeriod = 10 * time.Second

// DefaultControllerManagerQPS is Options.ControllerManagerQPS's default.
// At Kubernetes' 20 the volume binder, about five requests a claim,
// bound 900 claims in 3 min 45 s on an idle machine, one every 0.25 s;
// at 200, in 24 s (BenchmarkClaimBinding, docs/scale.md run 18). Large
// clusters raise the limit, and so does this one.
const DefaultControllerManagerQPS = 200

// DefaultVolumeRefreshPeriod is Options.VolumeRefreshPeriod's default.
const DefaultVolumeRefreshPeriod = 10 * time.Second

// Cluster is a running cluster. Stop it when done.
type Cluster struct {
	opts      Options
	cp        *controlPlane
	client    kubernetes.Interface
	api       *apiAccess
	net       *network
	podLogDir string
	// programDir holds copies of image programs that non-root containers
	// could not reach where they are (see stagePrograms); removed by Stop.
	programDir string
	cancel     context.CancelFunc

	mu    sync.Mutex
	nodes map[string]*processNode
}

// Start starts the control plane, the pod network, the storage provisioner
// and the nodes, and returns when every node is Ready.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Dir == "" || o.BinDir == "" {
		return nil, fmt.Errorf("cluster: Options.Dir and Options.BinDir are required")
	}
	var err error
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return nil, err
	}
	if len(o.Nodes) == 0 {
		o.Nodes = []NodeOptions{{Name: "node-a", Zone: "zone-a"}}
	}
	if o.Images == nil {
		o.Images = DefaultImages()
	}
	if o.PodCIDR == "" {
		o.PodCIDR = "10.244.0.0/16"
	}
	if o.Bridge == "" {
		o.Bridge = "cacheops0"
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	cp, err := startControlPlane(ctx, o)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, cp: cp, nodes: map[string]*processNode{}, podLogDir: filepath.Join(o.Dir, "logs", "pods")}
	if o.ControlPlaneOnly {
		return c, nil
	}
	fail := func(err error) (*Cluster, error) {
		c.Stop()
		return nil, err
	}
	if c.opts.Images, c.programDir, err = stagePrograms(o.Images, o.Dir); err != nil {
		return fail(err)
	}
	// The nodes report every pod's status through this client; client-go's
	// default rate limit (5 per second) would delay them by seconds.
	nodeCfg := rest.CopyConfig(cp.config)
	nodeCfg.QPS, nodeCfg.Burst = 500, 1000
	if c.client, err = kubernetes.NewForConfig(nodeCfg); err != nil {
		return fail(err)
	}
	if c.api, err = newAPIAccess(cp.config.Host, cp.config.CAData); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(c.podLogDir, 0o755); err != nil {
		return fail(err)
	}
	prefix, err := netip.ParsePrefix(o.PodCIDR)
	if err != nil {
		return fail(fmt.Errorf("pod CIDR: %w", err))
	}
	if c.net, err = newNetwork(o.Bridge, prefix); err != nil {
		return fail(err)
	}
	pods := 0
	for _, no := range o.Nodes {
		pods += cmp.Or(max(no.MaxPods, 0), defaultMaxPods)
	}
	// Best effort: a machine that does not let us (no root, a read-only
	// /proc/sys) runs small clusters with its own limits.
	if changed, err := sizeNeighbourTable(neighbourDir, pods); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: sizing the kernel's neighbour table for %d pods: %v (changed: %q)\n", pods, err, changed)
	}
	bg, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if err := c.startProvisioner(bg); err != nil {
		return fail(err)
	}
	for _, no := range o.Nodes {
		if err := c.StartNode(ctx, no.Name); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// Kubeconfig is the path of an admin kubeconfig for the cluster.
func (c *Cluster) Kubeconfig() string { return c.cp.kubeconfig }

// Config is an admin client configuration.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.cp.config) }

// LogDir holds the control plane's and the nodes' logs.
func (c *Cluster) LogDir() string { return c.cp.logDir }

// PodLogDir holds one log file per container: NAMESPACE_POD_CONTAINER.log.
func (c *Cluster) PodLogDir() string { return c.podLogDir }

// Gateway is this machine's address on the pod network.
func (c *Cluster) Gateway() string {
	if c.net == nil {
		return ""
	}
	return c.net.Gateway()
}

// RestartAPIServer stops and starts kube-apiserver, keeping its address.
func (c *Cluster) RestartAPIServer() error { return c.cp.restartAPIServer() }

// Stop stops everything the cluster started: pods' processes, nodes, the
// provisioner, the control plane, the pod network; and removes the copies
// of image programs Start made.
func (c *Cluster) Stop() {
	c.mu.Lock()
	nodes := make([]*processNode, 0, len(c.nodes))
	for name, n := range c.nodes {
		nodes = append(nodes, n)
		delete(c.nodes, name)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.stop(false)
		}()
	}
	wg.Wait()
	if c.cancel != nil {
		c.cancel()
	}
	c.cp.stop()
	if c.net != nil {
		c.net.close()
	}
	if c.programDir != "" {
		_ = os.RemoveAll(c.programDir)
	}
}

func everything() labels.Selector { return labels.Everything() }
