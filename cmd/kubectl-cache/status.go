package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// status prints a live cluster's phase, pods, roles, operation and
// conditions.
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
	masters := "master " + orDash(st.CurrentMaster)
	if cc.IsSharded() {
		masters = fmt.Sprintf("sharded, %d shards × %d pods", cc.ShardCount(), cc.PodsPerShard())
	}
	fmt.Fprintf(w, "CacheCluster %s/%s: %s, version %s, %d/%d pods ready, %s\n",
		cc.Namespace, cc.Name, orDash(string(st.Phase)), orDash(st.CurrentVersion), st.ReadyReplicas, cc.DesiredReplicas(), masters)
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
	if cc.IsSharded() {
		// What the nodes report (CLUSTER NODES), as day-two last read it.
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SHARD\tSLOTS\tMASTER\tREPLICAS")
		for _, sh := range st.Shards {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", sh.Index, orDash(strings.Join(sh.Slots, ",")), orDash(sh.Master), orDash(strings.Join(sh.Replicas, ",")))
		}
		_ = tw.Flush()
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	_ = tw.Flush()
}
