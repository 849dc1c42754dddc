package change

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteText writes the plans for a terminal: one line per cluster, then
// what admission refuses, the warnings, the operations in order and the
// objects that change.
func WriteText(w io.Writer, plans []ClusterPlan) {
	if len(plans) == 0 {
		fmt.Fprintln(w, "No CacheCluster changes.")
		return
	}
	for _, p := range plans {
		fmt.Fprintf(w, "CacheCluster %s/%s: %s\n", p.Namespace, p.Name, p.Change)
		for _, r := range p.Rejected {
			fmt.Fprintf(w, "  REJECTED %s\n", r)
		}
		if len(p.Drift) > 0 {
			fmt.Fprintln(w, "  DRIFT    the live spec differs from --base; this plan starts from the live spec:")
			for _, d := range p.Drift {
				fmt.Fprintf(w, "             %s\n", d)
			}
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

// WriteMarkdown writes the plans as a pull-request comment: a section per
// cluster with a table of the operations and the diff of the rendered
// objects folded away.
func WriteMarkdown(w io.Writer, plans []ClusterPlan) {
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
		if len(p.Drift) > 0 {
			fmt.Fprintf(w, "> :rotating_light: **Drift:** the live spec differs from the base; this plan starts from the live spec: %s\n\n", strings.Join(p.Drift, "; "))
		}
		for _, x := range p.Warnings {
			fmt.Fprintf(w, "> :warning: %s\n\n", x)
		}
		writeMarkdownOperations(w, p.Operations)
		writeMarkdownObjects(w, p.Objects)
	}
}

func writeMarkdownOperations(w io.Writer, ops []PlannedOperation) {
	if len(ops) == 0 {
		return
	}
	fmt.Fprintln(w, "| # | operation | what | impact |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for i, op := range ops {
		fmt.Fprintf(w, "| %d | %s | %s | %s |\n", i+1, op.Type, op.Description, impact(op))
	}
	fmt.Fprintln(w)
}

func writeMarkdownObjects(w io.Writer, objs []ObjectDiff) {
	if len(objs) == 0 {
		return
	}
	fmt.Fprintf(w, "<details><summary>%d rendered object%s change</summary>\n\n```diff\n", len(objs), plural(len(objs)))
	for _, o := range objs {
		fmt.Fprint(w, o.Diff)
	}
	fmt.Fprint(w, "```\n</details>\n\n")
}

// WriteJSON writes the plans as indented JSON, for tools.
func WriteJSON(w io.Writer, plans []ClusterPlan) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(plans)
}

// impact sums up the pod restarts and switchovers of an operation.
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
