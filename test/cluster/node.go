package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	vkslog "github.com/virtual-kubelet/virtual-kubelet/log/slog"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeOptions describes one process-backed node.
type NodeOptions struct {
	// Name of the Node object.
	Name string
	// Zone is the node's topology.kubernetes.io/zone label.
	Zone string
	// MaxPods is the node's pod capacity; default 110, the kubelet's.
	// A benchmark of hundreds of clusters needs more.
	MaxPods int
}

// defaultMaxPods is a node's pod capacity when NodeOptions.MaxPods is not
// set: the kubelet's default.
const defaultMaxPods = 110

// processNode is a virtual-kubelet node whose pods are local processes.
type processNode struct {
	opts     NodeOptions
	provider *provider
	client   kubernetes.Interface
	cancel   context.CancelFunc
	done     <-chan struct{}
}

var setLogOnce sync.Once

// startNode registers a node and serves its pods until stop.
func (c *Cluster) startNode(ctx context.Context, o NodeOptions) (*processNode, error) {
	setLogOnce.Do(func() {
		f, err := os.OpenFile(filepath.Join(c.cp.logDir, "nodes.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			log.L = vkslog.FromSlog(slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo})))
		}
	})
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cert, err := selfSignedCert(o.Name)
	if err != nil {
		return nil, err
	}
	prov := &provider{
		node: o.Name, zone: o.Zone,
		dir:    filepath.Join(c.opts.Dir, "nodes", o.Name),
		logDir: c.podLogDir,
		images: c.opts.Images,
		net:    c.net,
		client: c.client,
		api:    c.api,
		pods:   map[string]*podRuntime{},
	}
	if err := os.MkdirAll(prov.dir, 0o755); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	n, err := nodeutil.NewNode(o.Name, func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		prov.secrets, prov.configMaps, prov.podLister = pc.Secrets, pc.ConfigMaps, pc.Pods
		prov.env = &envResolver{secrets: pc.Secrets, configMaps: pc.ConfigMaps}
		if o.Zone != "" {
			pc.Node.Labels[corev1.LabelTopologyZone] = o.Zone
		}
		pc.Node.Labels[corev1.LabelOSStable] = "linux"
		pc.Node.Labels["cache.cacheops.io/process-node"] = "true"
		maxPods := o.MaxPods
		if maxPods <= 0 {
			maxPods = defaultMaxPods
		}
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		}
		pc.Node.Status.Capacity, pc.Node.Status.Allocatable = capacity, capacity
		pc.Node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
		pc.Node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
		pc.Node.Status.NodeInfo.OperatingSystem = "linux"
		pc.Node.Status.NodeInfo.Architecture = "amd64"
		pc.Node.Status.NodeInfo.KubeletVersion = "v1.37.2"
		return prov, nil, nil
	},
		nodeutil.WithClient(statusOnlyClient{c.client}),
		nodeutil.WithTLSConfig(func(cfg *tls.Config) error {
			cfg.Certificates = append(cfg.Certificates, cert)
			return nil
		}),
		nodeutil.AttachProviderRoutes(mux),
		func(cfg *nodeutil.NodeConfig) error {
			cfg.HTTPListenAddr = "127.0.0.1:" + strconv.Itoa(port)
			cfg.Handler = nodeutil.WithAuth(nodeutil.NoAuth(), mux)
			cfg.SkipDownwardAPIResolution = true
			cfg.NumWorkers = 4
			return nil
		},
	)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", o.Name, err)
	}
	nctx, cancel := context.WithCancel(context.Background())
	go func() { _ = n.Run(nctx) }()
	go prov.resync(nctx)
	refresh := c.opts.VolumeRefreshPeriod
	if refresh <= 0 {
		refresh = DefaultVolumeRefreshPeriod
	}
	go prov.refreshVolumes(nctx, refresh)
	waitCtx, waitCancel := context.WithTimeout(ctx, 60*time.Second)
	defer waitCancel()
	if err := n.WaitReady(waitCtx, 60*time.Second); err != nil {
		cancel()
		return nil, fmt.Errorf("node %s did not become ready: %w", o.Name, err)
	}
	return &processNode{opts: o, provider: prov, client: c.client, cancel: cancel, done: n.Done()}, nil
}

// stop ends the node's processes and its controllers. The Node object
// stays, as after a machine failure, unless deleteNode is set.
func (n *processNode) stop(deleteNode bool) {
	n.provider.stopAll()
	n.cancel()
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
	}
	if deleteNode {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.client.CoreV1().Nodes().Delete(ctx, n.opts.Name, metav1.DeleteOptions{})
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// selfSignedCert serves the node's kubelet API; kube-apiserver does not
// verify kubelet certificates unless told to.
func selfSignedCert(name string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{name},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
