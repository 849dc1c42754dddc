package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	daytwoplan "github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/renderer"
)

// ClusterPlan is what a change does to one CacheCluster.
type ClusterPlan struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Change is created, deleted or changed.
	Change string `json:"change"`
	// Rejected lists changes the API server refuses at admission.
	Rejected []string `json:"rejected,omitempty"`
	// Warnings are changes that will not be applied as written.
	Warnings []string `json:"warnings,omitempty"`
	// Operations are the day-two operations, in the order they run.
	Operations []PlannedOperation `json:"operations,omitempty"`
	// Objects are the rendered objects that change, with their diff.
	Objects []ObjectDiff `json:"objects,omitempty"`
}

// PlannedOperation is one day-two operation and its impact.
type PlannedOperation struct {
	Type        string   `json:"type"`
	Description string   `json:"description"`
	Restarts    []string `json:"restarts,omitempty"`
	Switchovers []string `json:"switchovers,omitempty"`
}

// ObjectDiff is one rendered object that changes.
type ObjectDiff struct {
	Object string `json:"object"`
	Diff   string `json:"diff"`
}

const planUsage = `usage: kubectl cache plan --base FILE|DIR|GIT-REV --head FILE|DIR|GIT-REV [--format text|markdown|json] [--master POD | --live [--kubeconfig FILE]] [PATH...]`

func plan(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	base := fs.String("base", "", "the running state: a file, a folder, or a git revision")
	head := fs.String("head", "", "the proposed state: a file, a folder, or a git revision")
	format := fs.String("format", "text", "text, markdown or json")
	master := fs.String("master", "", "the pod that is master now (default: ordinal 0)")
	live := fs.Bool("live", false, "read each cluster's master and running operation from the cluster of the kubeconfig")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file for --live (default: $KUBECONFIG or ~/.kube/config)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *live && *master != "" {
		return errors.New("--master and --live exclude each other")
	}
	if *base == "" || *head == "" {
		return errors.New(planUsage)
	}
	before, err := loadClusters(*base, fs.Args())
	if err != nil {
		return fmt.Errorf("--base %s: %w", *base, err)
	}
	after, err := loadClusters(*head, fs.Args())
	if err != nil {
		return fmt.Errorf("--head %s: %w", *head, err)
	}
	state := func(*cachev1alpha1.CacheCluster) liveState { return liveState{master: *master} }
	if *live {
		lf := liveFlags{kubeconfig: *kubeconfig}
		c, defaultNS, err := lf.client()
		if err != nil {
			return fmt.Errorf("--live: %w", err)
		}
		state = func(cc *cachev1alpha1.CacheCluster) liveState { return readLive(c, defaultNS, cc) }
	}
	plans, err := planClusters(before, after, state)
	if err != nil {
		return err
	}
	switch *format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(plans)
	case "markdown":
		writeMarkdown(stdout, plans)
	case "text":
		writeText(stdout, plans)
	default:
		return fmt.Errorf("unknown --format %q (text, markdown or json)", *format)
	}
	return nil
}

// loadClusters reads CacheClusters from a file, a folder (every .yaml and
// .yml file in it, recursively) or a git revision (the given paths, or
// every YAML file of the revision).
func loadClusters(ref string, paths []string) (map[string]*cachev1alpha1.CacheCluster, error) {
	files := map[string][]byte{}
	if st, err := os.Stat(ref); err == nil {
		if !st.IsDir() {
			data, err := os.ReadFile(ref)
			if err != nil {
				return nil, err
			}
			files[ref] = data
		} else if err := filepath.WalkDir(ref, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !isYAML(p) {
				return err
			}
			data, err := os.ReadFile(p)
			files[p] = data
			return err
		}); err != nil {
			return nil, err
		}
	} else {
		if _, err := git("rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
			return nil, fmt.Errorf("neither a file, a folder nor a git revision here")
		}
		if len(paths) == 0 {
			out, err := git("ls-tree", "-r", "--full-tree", "--name-only", ref)
			if err != nil {
				return nil, err
			}
			for _, p := range strings.Split(strings.TrimSpace(out), "\n") {
				if isYAML(p) {
					paths = append(paths, p)
				}
			}
		}
		for _, p := range paths {
			if _, err := git("cat-file", "-e", ref+":"+p); err != nil {
				continue // absent at this revision
			}
			out, err := git("show", ref+":"+p)
			if err != nil {
				return nil, err
			}
			files[p] = []byte(out)
		}
	}
	clusters := map[string]*cachev1alpha1.CacheCluster{}
	for path, data := range files {
		ccs, err := decodeCacheClusters(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, cc := range ccs {
			if cc.Namespace == "" {
				cc.Namespace = "default"
			}
			clusters[cc.Namespace+"/"+cc.Name] = cc
		}
	}
	return clusters, nil
}

func isYAML(p string) bool {
	return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")
}

func git(args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command("git", args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// liveState is what the running cluster says, for a prediction.
type liveState struct {
	// master is the pod that is master now; empty means ordinal 0.
	master string
	// notes are facts about the live cluster a reviewer should see.
	notes []string
}

// readLive reads a cluster's master and running operation.
func readLive(c client.Client, defaultNS string, cc *cachev1alpha1.CacheCluster) liveState {
	ns := cc.Namespace
	if ns == "" {
		ns = defaultNS
	}
	got := &cachev1alpha1.CacheCluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cc.Name}, got); err != nil {
		return liveState{notes: []string{fmt.Sprintf("live: %s/%s not read (%v); the master is assumed on ordinal 0", ns, cc.Name, err)}}
	}
	st := liveState{master: got.Status.CurrentMaster}
	if op := got.Status.Operation; op != nil {
		st.notes = append(st.notes, fmt.Sprintf("live: %s %s is in progress (%s); this change runs after it", op.Type, op.ID, op.Reason))
	}
	if got.Status.Phase != "" && got.Status.Phase != cachev1alpha1.PhaseRunning {
		st.notes = append(st.notes, fmt.Sprintf("live: the cluster is %s", got.Status.Phase))
	}
	return st
}

func planClusters(before, after map[string]*cachev1alpha1.CacheCluster, state func(*cachev1alpha1.CacheCluster) liveState) ([]ClusterPlan, error) {
	keys := map[string]bool{}
	for k := range before {
		keys[k] = true
	}
	for k := range after {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var plans []ClusterPlan
	for _, k := range sorted {
		b, a := before[k], after[k]
		switch {
		case b == nil:
			plans = append(plans, ClusterPlan{Namespace: a.Namespace, Name: a.Name, Change: "created",
				Operations: []PlannedOperation{{Type: "Create", Description: fmt.Sprintf("a new cluster of %d pods, version %s", a.DesiredReplicas(), a.Spec.Version)}}})
		case a == nil:
			msg := "pods deleted; their data is deleted too"
			if b.Spec.Storage.RetainOnDelete {
				msg = "pods deleted; the PersistentVolumeClaims are kept (storage.retainOnDelete)"
			}
			plans = append(plans, ClusterPlan{Namespace: b.Namespace, Name: b.Name, Change: "deleted",
				Operations: []PlannedOperation{{Type: "Delete", Description: msg}}})
		case equality.Semantic.DeepEqual(b.Spec, a.Spec) && equality.Semantic.DeepEqual(b.Annotations, a.Annotations):
		default:
			st := state(b)
			p, err := planChange(b, a, st.master)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			p.Warnings = append(p.Warnings, st.notes...)
			plans = append(plans, p)
		}
	}
	return plans, nil
}

func planChange(b, a *cachev1alpha1.CacheCluster, master string) (ClusterPlan, error) {
	p := ClusterPlan{Namespace: a.Namespace, Name: a.Name, Change: "changed"}
	if !equality.Semantic.DeepEqual(b.Spec.Storage.ClassName, a.Spec.Storage.ClassName) {
		p.Rejected = append(p.Rejected, "storage.className: rejected at admission, it is immutable (create a new CacheCluster and restore a backup instead)")
		return p, nil
	}
	if !equality.Semantic.DeepEqual(b.Spec.Restore, a.Spec.Restore) {
		p.Rejected = append(p.Rejected, "restore: rejected at admission, it is immutable (it applies only when a cluster is created)")
		return p, nil
	}
	if !equality.Semantic.DeepEqual(b.Spec.Storage.Size, a.Spec.Storage.Size) {
		p.Warnings = append(p.Warnings, "storage.size: Kubernetes refuses to change a StatefulSet's volume claim template; the operator will report Stalled (ApplyFailed) and the claims keep their size")
	}
	if a.Spec.Paused {
		p.Warnings = append(p.Warnings, "paused: the operator changes nothing while spec.paused is set")
	}

	// The rendered objects, from spec (what the cluster converges to).
	diffs, templateChanged, err := objectDiffs(b, a)
	if err != nil {
		return p, err
	}
	p.Objects = diffs

	steps, err := daytwoplan.Simulate(b, a, master, templateChanged)
	if err != nil {
		return p, err
	}
	var cur *PlannedOperation
	for _, s := range steps {
		switch s.Type {
		case daytwoplan.ActionStartOperation:
			p.Operations = append(p.Operations, PlannedOperation{Type: string(s.Operation.Type), Description: s.Reason})
			cur = &p.Operations[len(p.Operations)-1]
		case daytwoplan.ActionRestartPod:
			if cur != nil {
				cur.Restarts = append(cur.Restarts, s.Pod)
			}
		case daytwoplan.ActionGracefulSwitchover:
			if cur != nil {
				cur.Switchovers = append(cur.Switchovers, s.Master+"→"+s.Pod)
			}
		}
	}
	if len(p.Operations) == 0 && len(p.Objects) > 0 {
		p.Operations = append(p.Operations, PlannedOperation{Type: "Apply", Description: "objects change; no pod restarts"})
	}
	return p, nil
}

// objectDiffs renders both sides and diffs the objects that differ. It
// also tells whether the StatefulSet's pod template differs: day-two then
// restarts the pods onto the new one, even when what changes (the restore
// init container of backup.autoRestore, a probe) is none of the values it
// approves.
func objectDiffs(b, a *cachev1alpha1.CacheCluster) ([]ObjectDiff, bool, error) {
	render := func(cc *cachev1alpha1.CacheCluster) (map[string]string, []string, any, error) {
		objs, err := renderer.Render(cc, renderer.DefaultCapabilities())
		if err != nil {
			return nil, nil, nil, err
		}
		out, order := map[string]string{}, []string{}
		var template any
		for _, o := range objs {
			y, err := yaml.Marshal(o.Object)
			if err != nil {
				return nil, nil, nil, err
			}
			k := o.GetKind() + "/" + o.GetName()
			out[k] = string(y)
			order = append(order, k)
			if o.GetKind() == "StatefulSet" && o.GetName() == cc.Name { // the cache pods', not the backup store's
				template, _, _ = unstructured.NestedFieldNoCopy(o.Object, "spec", "template")
			}
		}
		return out, order, template, nil
	}
	before, order, tb, err := render(b)
	if err != nil {
		return nil, false, err
	}
	after, order2, ta, err := render(a)
	if err != nil {
		return nil, false, err
	}
	for _, k := range order2 {
		if _, ok := before[k]; !ok {
			order = append(order, k)
		}
	}
	var diffs []ObjectDiff
	for _, k := range order {
		if before[k] == after[k] {
			continue
		}
		d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(before[k]), B: difflib.SplitLines(after[k]),
			FromFile: "base/" + k, ToFile: "head/" + k, Context: 2,
		})
		diffs = append(diffs, ObjectDiff{Object: k, Diff: d})
	}
	return diffs, !equality.Semantic.DeepEqual(tb, ta), nil
}

func impact(op PlannedOperation) string {
	var parts []string
	if n := len(op.Restarts); n > 0 {
		parts = append(parts, fmt.Sprintf("%d pod restart%s (%s)", n, plural(n), strings.Join(op.Restarts, ", ")))
	}
	if n := len(op.Switchovers); n > 0 {
		parts = append(parts, fmt.Sprintf("%d switchover%s (%s)", n, plural(n), strings.Join(op.Switchovers, ", ")))
	}
	if len(parts) == 0 {
		return "no pod restart"
	}
	return strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func writeText(w io.Writer, plans []ClusterPlan) {
	if len(plans) == 0 {
		fmt.Fprintln(w, "No CacheCluster changes.")
		return
	}
	for _, p := range plans {
		fmt.Fprintf(w, "CacheCluster %s/%s: %s\n", p.Namespace, p.Name, p.Change)
		for _, r := range p.Rejected {
			fmt.Fprintf(w, "  REJECTED %s\n", r)
		}
		for _, x := range p.Warnings {
			fmt.Fprintf(w, "  WARNING  %s\n", x)
		}
		for i, op := range p.Operations {
			fmt.Fprintf(w, "  %d. %s: %s — %s\n", i+1, op.Type, op.Description, impact(op))
		}
		for _, o := range p.Objects {
			fmt.Fprintf(w, "  changes %s\n", o.Object)
		}
	}
}

func writeMarkdown(w io.Writer, plans []ClusterPlan) {
	fmt.Fprintln(w, "### cacheops plan")
	fmt.Fprintln(w)
	if len(plans) == 0 {
		fmt.Fprintln(w, "No CacheCluster changes.")
		return
	}
	for _, p := range plans {
		fmt.Fprintf(w, "#### `%s/%s` — %s\n\n", p.Namespace, p.Name, p.Change)
		for _, r := range p.Rejected {
			fmt.Fprintf(w, "> :no_entry: **Rejected:** %s\n\n", r)
		}
		for _, x := range p.Warnings {
			fmt.Fprintf(w, "> :warning: %s\n\n", x)
		}
		if len(p.Operations) > 0 {
			fmt.Fprintln(w, "| # | operation | what | impact |")
			fmt.Fprintln(w, "| --- | --- | --- | --- |")
			for i, op := range p.Operations {
				fmt.Fprintf(w, "| %d | %s | %s | %s |\n", i+1, op.Type, op.Description, impact(op))
			}
			fmt.Fprintln(w)
		}
		if len(p.Objects) > 0 {
			fmt.Fprintf(w, "<details><summary>%d rendered object%s change</summary>\n\n```diff\n", len(p.Objects), plural(len(p.Objects)))
			for _, o := range p.Objects {
				fmt.Fprint(w, o.Diff)
			}
			fmt.Fprint(w, "```\n</details>\n\n")
		}
	}
}
