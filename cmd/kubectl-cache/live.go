package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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

func status(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var lf liveFlags
	lf.register(fs)
	name, err := parseNameFirst(fs, args)
	if err != nil {
		return err
	}
	_, cc, err := lf.get(name)
	if err != nil {
		return err
	}
	writeStatus(stdout, cc)
	return nil
}

func writeStatus(w io.Writer, cc *cachev1alpha1.CacheCluster) {
	st := cc.Status
	fmt.Fprintf(w, "CacheCluster %s/%s: %s, version %s, %d/%d pods ready, master %s\n",
		cc.Namespace, cc.Name, orDash(string(st.Phase)), orDash(st.CurrentVersion), st.ReadyReplicas, cc.DesiredReplicas(), orDash(st.CurrentMaster))
	if cc.Generation != st.ObservedGeneration {
		fmt.Fprintf(w, "  spec generation %d not observed yet (status describes %d)\n", cc.Generation, st.ObservedGeneration)
	}
	if op := st.Operation; op != nil {
		fmt.Fprintf(w, "Operation %s %s", op.Type, op.ID)
		if op.Step != "" {
			fmt.Fprintf(w, ", step %s", op.Step)
		}
		fmt.Fprintf(w, ", started %s ago: %s\n", time.Since(op.StartedAt.Time).Round(time.Second), op.Reason)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tROLE\tADDRESS\tREADY")
	for _, n := range st.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", n.PodName, orDash(n.Role), orDash(n.Address), n.Ready)
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func switchover(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("switchover", flag.ContinueOnError)
	var lf liveFlags
	lf.register(fs)
	to := fs.String("to", "", "the pod to make master (default: the in-sync replica with the most data)")
	wait := fs.Duration("wait", 0, "wait this long for the switchover to finish (0: return at once)")
	name, err := parseNameFirst(fs, args)
	if err != nil {
		return err
	}
	c, cc, err := lf.get(name)
	if err != nil {
		return err
	}
	ctx, ns := context.Background(), cc.Namespace
	target := *to
	if target == "" {
		target = cachev1alpha1.SwitchoverToBest
	} else if target == cc.Status.CurrentMaster {
		return fmt.Errorf("%s is the master already", target)
	}
	from := cc.Status.CurrentMaster
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, cachev1alpha1.AnnotationSwitchoverTo, target)
	if err := c.Patch(ctx, cc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "switchover of %s/%s requested (master %s → %s)\n", ns, name, orDash(from), target)
	if *wait == 0 {
		return nil
	}
	done, err := waitFor(ctx, c, cc, *wait, func() (bool, error) {
		if _, pending := cc.Annotations[cachev1alpha1.AnnotationSwitchoverTo]; pending {
			return false, nil
		}
		if cc.Status.CurrentMaster == from {
			return false, fmt.Errorf("the switchover was not done: %s is still the master (see kubectl describe cc %s)", from, name)
		}
		// Done when the new master carries the label the client Service
		// selects, so traffic goes there.
		return labelledMaster(cc), nil
	})
	if err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("the switchover did not finish within %s", *wait)
	}
	fmt.Fprintf(stdout, "%s is the master\n", cc.Status.CurrentMaster)
	return nil
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

// labelledMaster tells whether the recorded master is labelled master.
func labelledMaster(cc *cachev1alpha1.CacheCluster) bool {
	for _, n := range cc.Status.Nodes {
		if n.PodName == cc.Status.CurrentMaster {
			return n.Role == cachev1alpha1.RoleMaster
		}
	}
	return false
}
