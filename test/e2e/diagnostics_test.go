//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podLogLines is how much of each container's log a failed wait prints.
const podLogLines = 20

// notReadyPods is the description of a wait for a workload: when the wait
// fails, Gomega calls it, and the failure says, for every pod of the
// namespace that is not Ready, its phase, each container's state and the
// last lines of its log, kept by the process-backed cluster (a container
// that dies at once, e.g. "pod-init: permission denied", says so only
// there). what says what was waited for.
func notReadyPods(ns, what string) func() string {
	return func() string {
		var b strings.Builder
		b.WriteString(what)
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
			fmt.Fprintf(&b, "\n(listing the pods of %s: %v)", ns, err)
			return b.String()
		}
		n := 0
		for _, p := range pods.Items {
			if podReady(&p) {
				continue
			}
			n++
			fmt.Fprintf(&b, "\n\npod %s/%s, not ready: phase %s, node %s", ns, p.Name, p.Status.Phase, p.Spec.NodeName)
			if p.Status.Message != "" {
				fmt.Fprintf(&b, ", %s", p.Status.Message)
			}
			statuses := map[string]corev1.ContainerStatus{}
			for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				statuses[cs.Name] = cs
			}
			for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
				fmt.Fprintf(&b, "\n  container %s: %s", c.Name, containerState(statuses[c.Name]))
				logs, err := env.PodLogTail(ns, p.Name, c.Name, podLogLines)
				switch {
				case err != nil:
					fmt.Fprintf(&b, "\n    (no log: %v)", err)
				case logs == "":
					b.WriteString("\n    (empty log)")
				default:
					fmt.Fprintf(&b, "\n    last %d lines of its log:\n    | %s", podLogLines,
						strings.ReplaceAll(strings.TrimRight(logs, "\n"), "\n", "\n    | "))
				}
			}
		}
		if n == 0 {
			fmt.Fprintf(&b, "\n(every pod of namespace %s is Ready: %d pods)", ns, len(pods.Items))
		}
		return b.String()
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerState says in a few words what a container status says.
func containerState(cs corev1.ContainerStatus) string {
	s := cs.State
	var out string
	switch {
	case s.Waiting != nil:
		out = fmt.Sprintf("waiting (%s) %s", s.Waiting.Reason, s.Waiting.Message)
	case s.Running != nil:
		out = fmt.Sprintf("running since %s, ready %t", s.Running.StartedAt.Format("15:04:05"), cs.Ready)
	case s.Terminated != nil:
		out = fmt.Sprintf("terminated (%s) with exit code %d", s.Terminated.Reason, s.Terminated.ExitCode)
	default:
		return "no status yet"
	}
	if cs.RestartCount > 0 {
		out += fmt.Sprintf(", %d restarts", cs.RestartCount)
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		out += fmt.Sprintf(", last exit code %d (%s)", t.ExitCode, t.Reason)
	}
	return out
}
