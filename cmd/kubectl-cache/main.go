// Command kubectl-cache is the cacheops CLI, usable as `kubectl cache …`
// when on PATH. `render` prints, offline, exactly the objects the operator
// applies for a CacheCluster manifest — the same objects `helm template
// charts/cachecluster -f <values>` prints for the values it derives.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/cacheops/cacheops/gitops/change"
	"github.com/cacheops/cacheops/renderer"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kubectl-cache:", err)
		os.Exit(1)
	}
}

const usage = `usage: kubectl cache COMMAND ...

  render -f FILE [--values] [--operator-namespace NS] [--operator-pod-labels K=V,...]
           print the objects the operator applies for the CacheCluster(s) in
           FILE ("-" reads standard input); --values prints the chart values
           instead, for helm template charts/cachecluster -f <values>; the
           operator flags name the manager's pods as its own flags do (the
           NetworkPolicies admit them)
  plan [--base FILE|DIR|REV] --head FILE|DIR|REV [--format text|markdown|json] [--master POD | --live] [PATH...]
           what a change does to each CacheCluster: the day-two operations
           it triggers in order, with the pods they restart and the
           switchovers, and the diff of the rendered objects; --live plans
           from the live spec and reports how it differs from --base
           (without --base: from the live CacheClusters)
  status NAME [-n NAMESPACE]
           a live cluster's phase, pods, roles, operation and conditions
  switchover NAME [--to POD] [--wait DURATION] [-n NAMESPACE]
           ask day-two to move the master role (to POD, or to the best
           in-sync replica)
  backup NAME [--wait DURATION] [-n NAMESPACE]
           take a backup now: a CacheBackup that day-two streams to the
           cluster's spec.backup.s3 or spec.backup.pvc when no other
           operation runs
  recommend NAME --repo DIR --path FILE [--branch B] [--remote R] [--no-push] [--from FILE] [-n NAMESPACE]
           write the cluster's status.recommendations into its manifest in
           a git checkout (comments kept), commit them on a new branch with
           the evidence in the message and push it to the remote (origin),
           for a pull request; --no-push only commits`

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "render":
		return render(args[1:], stdin, stdout)
	case "plan":
		return plan(args[1:], stdout)
	case "status":
		return status(args[1:], stdout)
	case "switchover":
		return switchover(args[1:], stdout)
	case "recommend":
		return recommendCmd(args[1:], stdout)
	case "backup":
		return backupNow(args[1:], stdout)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

func render(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	file := fs.String("f", "", "CacheCluster manifest (- for standard input)")
	valuesOnly := fs.Bool("values", false, "print the chart values instead of the objects")
	opNamespace := fs.String("operator-namespace", renderer.Operator.Namespace, "namespace of the operator's pods, as the manager's --operator-namespace: the NetworkPolicies admit them")
	opLabels := fs.String("operator-pod-labels", labels.Set(renderer.Operator.PodLabels).String(), "labels of the operator's pods (k=v,k=v), as the manager's --operator-pod-labels")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("render needs -f FILE")
	}
	podLabels, err := labels.ConvertSelectorToLabelsMap(*opLabels)
	if err != nil {
		return fmt.Errorf("--operator-pod-labels: %w", err)
	}
	saved := renderer.Operator
	defer func() { renderer.Operator = saved }()
	renderer.Operator = renderer.OperatorIdentity{Namespace: *opNamespace, PodLabels: podLabels}
	var data []byte
	if *file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		return err
	}
	clusters, err := change.DecodeManifest(data)
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	if len(clusters) == 0 {
		return fmt.Errorf("%s holds no CacheCluster", *file)
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	for _, cc := range clusters {
		if *valuesOnly {
			values, err := renderer.Values(cc)
			if err != nil {
				return fmt.Errorf("CacheCluster %s: %w", cc.Name, err)
			}
			out, err := yaml.Marshal(values)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "---\n# values of CacheCluster %s/%s\n%s", cc.Namespace, cc.Name, out)
			continue
		}
		objs, err := renderer.Render(cc, renderer.DefaultCapabilities())
		if err != nil {
			return fmt.Errorf("CacheCluster %s: %w", cc.Name, err)
		}
		for _, o := range objs {
			out, err := yaml.Marshal(o.Object)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "---\n%s", out)
		}
	}
	return nil
}
