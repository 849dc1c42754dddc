package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/gitops/change"
)

const planUsage = `usage: kubectl cache plan [--base FILE|DIR|GIT-REV] --head FILE|DIR|GIT-REV [--format text|markdown|json] [--master POD | --live [--kubeconfig FILE]] [PATH...]
  --base may be left out with --live: the base is then the live CacheClusters`

// plan prints what a change does to each CacheCluster (package change).
func plan(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	base := fs.String("base", "", "the running state: a file, a folder, or a git revision (default with --live: the live CacheClusters)")
	head := fs.String("head", "", "the proposed state: a file, a folder, or a git revision")
	format := fs.String("format", "text", "text, markdown or json")
	master := fs.String("master", "", "the pod that is master now (default: ordinal 0)")
	live := fs.Bool("live", false, "plan from each cluster's live spec, master and running operation (the cluster of the kubeconfig), and report how the live spec differs from --base")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file for --live (default: $KUBECONFIG or ~/.kube/config)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *live && *master != "" {
		return errors.New("--master and --live exclude each other")
	}
	if *head == "" || (*base == "" && !*live) {
		return errors.New(planUsage)
	}
	after, err := change.Load(*head, fs.Args())
	if err != nil {
		return fmt.Errorf("--head %s: %w", *head, err)
	}
	var before map[string]*cachev1alpha1.CacheCluster
	if *base != "" {
		if before, err = change.Load(*base, fs.Args()); err != nil {
			return fmt.Errorf("--base %s: %w", *base, err)
		}
	}
	state := func(*cachev1alpha1.CacheCluster) change.Live { return change.Live{Master: *master} }
	if *live {
		lf := liveFlags{kubeconfig: *kubeconfig}
		c, defaultNS, err := lf.client()
		if err != nil {
			return fmt.Errorf("--live: %w", err)
		}
		state = func(cc *cachev1alpha1.CacheCluster) change.Live { return readLive(c, defaultNS, cc) }
		if *base == "" {
			if before, err = liveBase(c, after); err != nil {
				return fmt.Errorf("--live: %w", err)
			}
		}
	}
	plans, err := change.Predict(before, after, state)
	if err != nil {
		return err
	}
	switch *format {
	case "json":
		return change.WriteJSON(stdout, plans)
	case "markdown":
		change.WriteMarkdown(stdout, plans)
	case "text":
		change.WriteText(stdout, plans)
	default:
		return fmt.Errorf("unknown --format %q (text, markdown or json)", *format)
	}
	return nil
}

// readLive reads a cluster's master and running operation from the API
// server, for plan --live.
func readLive(c client.Client, defaultNS string, cc *cachev1alpha1.CacheCluster) change.Live {
	ns := cc.Namespace
	if ns == "" {
		ns = defaultNS
	}
	got := &cachev1alpha1.CacheCluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cc.Name}, got); err != nil {
		return change.Unread(ns, cc.Name, err)
	}
	return change.LiveOf(got)
}

// liveBase reads the live CacheCluster of each cluster of head, for a plan
// without --base: a cluster that does not exist yet is created by the
// change. The clusters of head get their defaults, as the live ones have.
func liveBase(c client.Client, head map[string]*cachev1alpha1.CacheCluster) (map[string]*cachev1alpha1.CacheCluster, error) {
	before := map[string]*cachev1alpha1.CacheCluster{}
	for k, cc := range head {
		got := &cachev1alpha1.CacheCluster{}
		err := c.Get(context.Background(), client.ObjectKeyFromObject(cc), got)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading CacheCluster %s: %w", k, err)
		default:
			// The head's metadata and the live spec: a cluster whose live
			// spec is the head's is no change.
			b := cc.DeepCopy()
			b.Spec, b.Status = got.Spec, got.Status
			if head[k], err = change.WithDefaults(cc); err != nil {
				return nil, err
			}
			before[k] = b
		}
	}
	return before, nil
}
