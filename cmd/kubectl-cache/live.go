package main

import (
	"context"
	"errors"
	"flag"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// liveFlags are the flags of the commands that talk to a cluster.
type liveFlags struct {
	namespace  string
	kubeconfig string
}

func (l *liveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.namespace, "n", "", "namespace (default: the kubeconfig context's)")
	fs.StringVar(&l.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
}

// client connects as kubectl does and returns the namespace to use.
func (l *liveFlags) client() (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if l.kubeconfig != "" {
		rules.ExplicitPath = l.kubeconfig
	}
	cfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rc, err := cfg.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns := l.namespace
	if ns == "" {
		if ns, _, err = cfg.Namespace(); err != nil {
			return nil, "", err
		}
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cachev1alpha1.AddToScheme(scheme)
	c, err := client.New(rc, client.Options{Scheme: scheme})
	return c, ns, err
}

// get connects and reads the named CacheCluster.
func (l *liveFlags) get(name string) (client.Client, *cachev1alpha1.CacheCluster, error) {
	c, ns, err := l.client()
	if err != nil {
		return nil, nil, err
	}
	cc := &cachev1alpha1.CacheCluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cc); err != nil {
		return nil, nil, err
	}
	return c, cc, nil
}

// parseNameFirst parses flags that may come after the cluster's name.
func parseNameFirst(fs *flag.FlagSet, args []string) (string, error) {
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	if name == "" {
		return "", errors.New("the CacheCluster's name is missing")
	}
	return name, nil
}

// waitFor reads obj again every 250 ms until done says so, fails, or wait
// has passed (then false).
func waitFor(ctx context.Context, c client.Client, obj client.Object, wait time.Duration, done func() (bool, error)) (bool, error) {
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		if ok, err := done(); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// orDash prints an empty value as a dash.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
