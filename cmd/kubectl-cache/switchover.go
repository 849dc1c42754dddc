package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// switchover asks day-two to move a live cluster's master role, and with
// --wait waits until the new master is labelled so.
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

// labelledMaster tells whether the recorded master is labelled master.
func labelledMaster(cc *cachev1alpha1.CacheCluster) bool {
	for _, n := range cc.Status.Nodes {
		if n.PodName == cc.Status.CurrentMaster {
			return n.Role == cachev1alpha1.RoleMaster
		}
	}
	return false
}
