package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// childHealth is one rendered child as kstatus (or, for the StatefulSet,
// our own rules) sees it.
type childHealth struct {
	kind, name string
	status     status.Status
	message    string
}

// observe reads the children, the StatefulSet and the pods after applying.
func (r *Reconciler) observe(ctx context.Context, s *scope) error {
	for _, obj := range s.desired {
		live, err := r.getLive(ctx, r.Client, obj.GroupVersionKind(), client.ObjectKeyFromObject(obj))
		if err != nil {
			return err
		}
		h := childHealth{kind: obj.GetKind(), name: obj.GetName()}
		switch {
		case live == nil:
			// Just applied and not in the cache yet.
			h.status, h.message = status.InProgressStatus, "not observed yet"
		case obj.GetKind() == "StatefulSet":
			sts := &appsv1.StatefulSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, sts); err != nil {
				return err
			}
			h.status, h.message = statefulSetHealth(sts)
			if sts.Name == s.cc.Name {
				s.statefulSet = sts
			} else if h.status != status.CurrentStatus {
				// The backup store: the cache serves without it, and a
				// backup that cannot reach it says so in
				// LastBackupSucceeded, as one whose bucket is down does.
				h.status, h.message = status.CurrentStatus, "backup store: "+h.message
			}
		default:
			res, err := status.Compute(live)
			if err != nil {
				h.status, h.message = status.UnknownStatus, err.Error()
			} else {
				h.status, h.message = res.Status, res.Message
			}
		}
		s.children = append(s.children, h)
	}

	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(s.cc.Namespace), client.MatchingLabels{cachev1alpha1.LabelCluster: s.cc.Name}); err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	s.pods = pods.Items
	return nil
}

// statefulSetHealth judges the StatefulSet by its pods. kstatus calls every
// OnDelete StatefulSet Current; we need to know whether all pods exist, are
// ready and run the latest template.
func statefulSetHealth(sts *appsv1.StatefulSet) (status.Status, string) {
	want := int32(1)
	if sts.Spec.Replicas != nil {
		want = *sts.Spec.Replicas
	}
	st := sts.Status
	switch {
	case st.ObservedGeneration < sts.Generation:
		return status.InProgressStatus, "StatefulSet spec not observed yet"
	case st.Replicas < want:
		return status.InProgressStatus, fmt.Sprintf("%d of %d pods exist", st.Replicas, want)
	case st.Replicas > want:
		return status.InProgressStatus, fmt.Sprintf("%d pods are left to remove", st.Replicas-want)
	case st.ReadyReplicas < want:
		return status.InProgressStatus, fmt.Sprintf("%d of %d pods are ready", st.ReadyReplicas, want)
	case st.UpdatedReplicas < want && st.UpdateRevision != st.CurrentRevision:
		return status.InProgressStatus, fmt.Sprintf("%d of %d pods run the latest template; the others restart in order (replicas first, master last)", st.UpdatedReplicas, want)
	}
	return status.CurrentStatus, fmt.Sprintf("%d of %d pods ready", st.ReadyReplicas, want)
}

// MajorityDownAfter is how long more than half of the pods may be down
// before a Degraded cluster is reported Failed.
var MajorityDownAfter = 2 * time.Minute

// summarize turns what the reconcile saw into phase and conditions. It is a
// pure function of the scope and the error, so it is unit-tested on its own.
func summarize(s *scope, stepErr error) {
	cc := s.cc
	gen := cc.Generation
	prev := cc.Status.Phase
	// A condition that ends where it started keeps its transition time, even
	// if it was changed and changed back on the way (no status write).
	orig := append([]metav1.Condition(nil), cc.Status.Conditions...)
	defer keepTransitions(cc, orig)

	if s.statefulSet != nil {
		sts := s.statefulSet
		cc.Status.Replicas = sts.Status.Replicas
		cc.Status.ReadyReplicas = sts.Status.ReadyReplicas
		if sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector); err == nil {
			cc.Status.Selector = sel.String()
		}
	} else if cc.Status.Selector == "" {
		cc.Status.Selector = labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "cachecluster", cachev1alpha1.LabelCluster: cc.Name}).String()
	}
	if s.pods != nil || s.statefulSet != nil {
		cc.Status.Nodes = nodesOf(s.pods)
	}

	if s.stalled != nil {
		cc.Status.Phase = cachev1alpha1.PhaseFailed
		setCondition(cc, cachev1alpha1.ConditionStalled, metav1.ConditionTrue, s.stalled.reason, s.stalled.message, gen)
		setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionFalse, s.stalled.reason, s.stalled.message, gen)
		removeCondition(cc, cachev1alpha1.ConditionReconciling)
		ensureCondition(cc, cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, cachev1alpha1.ReasonNoPodReady, "No pod is ready", gen)
		ensureCondition(cc, cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, s.stalled.reason, "Not evaluated while stalled", gen)
		return
	}
	removeCondition(cc, cachev1alpha1.ConditionStalled)
	defer blockedRollout(cc)
	if stepErr != nil {
		// An error worth retrying (the API server refused a write, timed
		// out, or the cache lagged): Ready says what failed in the API
		// server's words, Reconciling that it is being retried with
		// backoff; Available and Degraded keep the last judgement, the
		// pods did not change because of it.
		reason := cachev1alpha1.ReasonReconcileError
		if s.failedStep == "apply" {
			reason = cachev1alpha1.ReasonApplyFailed
		}
		if cc.Status.Phase == "" {
			cc.Status.Phase = cachev1alpha1.PhasePending
		}
		setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionFalse, reason, stepErr.Error(), gen)
		setCondition(cc, cachev1alpha1.ConditionReconciling, metav1.ConditionTrue, "RetryingAfterError", stepErr.Error(), gen)
		return
	}

	// Children first: the first one that is not current explains Ready.
	var notReady, failed []string
	for _, c := range s.children {
		switch c.status {
		case status.CurrentStatus:
		case status.FailedStatus:
			failed = append(failed, fmt.Sprintf("%s %s: %s", c.kind, c.name, c.message))
		default:
			notReady = append(notReady, fmt.Sprintf("%s %s: %s", c.kind, c.name, c.message))
		}
	}

	if msg := shardsNotReady(cc); msg != "" {
		notReady = append(notReady, msg)
	}

	want := cc.DesiredReplicas()
	ready := cc.Status.ReadyReplicas
	if ready > 0 {
		setCondition(cc, cachev1alpha1.ConditionAvailable, metav1.ConditionTrue, cachev1alpha1.ReasonPodsReady, fmt.Sprintf("%d of %d pods ready", ready, want), gen)
	} else {
		setCondition(cc, cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, cachev1alpha1.ReasonNoPodReady, fmt.Sprintf("0 of %d pods ready", want), gen)
	}

	op := cc.Status.Operation
	opPhase := operationPhase(op)
	if lost := meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionDataLost); lost != nil && lost.Status == metav1.ConditionTrue &&
		(op == nil || op.Type != cachev1alpha1.OperationRestore) {
		// Day-two found the data gone and restores nothing by itself: a
		// person decides (the message says how).
		cc.Status.Phase = cachev1alpha1.PhaseFailed
		setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionFalse, cachev1alpha1.ReasonDataLost, lost.Message, gen)
		setCondition(cc, cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonDataLost, lost.Message, gen)
		setCondition(cc, cachev1alpha1.ConditionStalled, metav1.ConditionTrue, cachev1alpha1.ReasonDataLost, lost.Message, gen)
		removeCondition(cc, cachev1alpha1.ConditionReconciling)
		return
	}
	if r := meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionRestored); r != nil && r.Status == metav1.ConditionFalse && r.Reason == cachev1alpha1.ReasonRestoreIncompatible {
		// Day-two found that the dump does not fit this cluster (a
		// sharded backup of another shard count, read from the bucket):
		// nothing was restored, a person recreates the cluster.
		cc.Status.Phase = cachev1alpha1.PhaseFailed
		setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionFalse, r.Reason, r.Message, gen)
		setCondition(cc, cachev1alpha1.ConditionStalled, metav1.ConditionTrue, r.Reason, r.Message, gen)
		removeCondition(cc, cachev1alpha1.ConditionReconciling)
		return
	}
	wasRunning := prev == cachev1alpha1.PhaseRunning || prev == cachev1alpha1.PhaseDegraded || prev == cachev1alpha1.PhaseBackupRunning ||
		prev == cachev1alpha1.PhaseScaling || prev == cachev1alpha1.PhaseUpgrading ||
		(prev == cachev1alpha1.PhaseFailed && cc.Status.CurrentMaster != "")
	switch {
	case len(failed) > 0:
		cc.Status.Phase = cachev1alpha1.PhaseDegraded
		msg := strings.Join(failed, "; ")
		setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionFalse, cachev1alpha1.ReasonChildFailed, msg, gen)
		setCondition(cc, cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonChildFailed, msg, gen)
		removeCondition(cc, cachev1alpha1.ConditionReconciling)
	case len(notReady) == 0 && opPhase != "":
		// Every pod is ready, but day-two is still rolling a change out.
		cc.Status.Phase = opPhase
		msg := operationMessage(op)
		setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionFalse, cachev1alpha1.ReasonProgressing, msg, gen)
		setCondition(cc, cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonProgressing, "Changes are rolling out", gen)
		setCondition(cc, cachev1alpha1.ConditionReconciling, metav1.ConditionTrue, cachev1alpha1.ReasonProgressing, msg, gen)
	case len(notReady) == 0:
		cc.Status.Phase = cachev1alpha1.PhaseRunning
		if sts := s.statefulSet; sts != nil && sts.Status.ObservedGeneration == sts.Generation && sts.Status.UpdatedReplicas == sts.Status.Replicas {
			// Only when every pod runs the template.
			cc.Status.CurrentVersion = sts.Spec.Template.Annotations[cachev1alpha1.AnnotationVersion]
		}
		readyMsg := fmt.Sprintf("%d of %d pods ready, all objects applied", ready, want)
		if op != nil && op.Type == cachev1alpha1.OperationBackup {
			// A backup reads from a replica; the cluster serves as usual
			// and stays Ready (a nightly backup must not flip health).
			cc.Status.Phase = cachev1alpha1.PhaseBackupRunning
			readyMsg += "; " + operationMessage(op)
		}
		setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionTrue, cachev1alpha1.ReasonReconciled, readyMsg, gen)
		setCondition(cc, cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonPodsReady, "All pods ready", gen)
		removeCondition(cc, cachev1alpha1.ConditionReconciling)
	default:
		msg := strings.Join(notReady, "; ")
		switch {
		case !wasRunning:
			cc.Status.Phase = cachev1alpha1.PhaseInitializing
		case opPhase != "":
			cc.Status.Phase = opPhase
			msg = operationMessage(op) + "; " + msg
		case s.statefulSet != nil && s.statefulSet.Status.Replicas != want:
			cc.Status.Phase = cachev1alpha1.PhaseScaling
		case s.statefulSet != nil && s.statefulSet.Status.UpdatedReplicas < want && s.statefulSet.Status.UpdateRevision != s.statefulSet.Status.CurrentRevision:
			cc.Status.Phase = cachev1alpha1.PhaseUpgrading
		default:
			cc.Status.Phase = cachev1alpha1.PhaseDegraded
		}
		if cc.Status.Phase == cachev1alpha1.PhaseDegraded {
			// More than half of the pods down for long: no safe failover is
			// possible any more; say so plainly.
			since := meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionDegraded)
			if 2*ready < want && since != nil && since.Status == metav1.ConditionTrue && !s.now.IsZero() && s.now.Sub(since.LastTransitionTime.Time) > MajorityDownAfter {
				cc.Status.Phase = cachev1alpha1.PhaseFailed
				msg = fmt.Sprintf("%d of %d pods have been down for more than %s; the cluster cannot serve safely. Check the pods' nodes and volumes (kubectl describe pods -l %s=%s)", want-ready, want, MajorityDownAfter, cachev1alpha1.LabelCluster, cc.Name)
				setCondition(cc, cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonMajorityDown, msg, gen)
				setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionFalse, cachev1alpha1.ReasonMajorityDown, msg, gen)
				// No safe step is left until the pods are back: Stalled, so
				// kstatus (Flux) reports Failed instead of waiting forever.
				setCondition(cc, cachev1alpha1.ConditionStalled, metav1.ConditionTrue, cachev1alpha1.ReasonMajorityDown, msg, gen)
				removeCondition(cc, cachev1alpha1.ConditionReconciling)
				return
			}
			setCondition(cc, cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonPodsNotReady, msg, gen)
		} else {
			setCondition(cc, cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonProgressing, "Changes are rolling out", gen)
		}
		setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionFalse, cachev1alpha1.ReasonProgressing, msg, gen)
		setCondition(cc, cachev1alpha1.ConditionReconciling, metav1.ConditionTrue, cachev1alpha1.ReasonProgressing, msg, gen)
	}
}

// operationPhase is the phase a day-two operation in progress shows; a
// failover shows what the pods show (Degraded).
func operationPhase(op *cachev1alpha1.OperationStatus) cachev1alpha1.Phase {
	if op == nil {
		return ""
	}
	switch op.Type {
	case cachev1alpha1.OperationScaling:
		return cachev1alpha1.PhaseScaling
	case cachev1alpha1.OperationUpgrade, cachev1alpha1.OperationReconfigure:
		return cachev1alpha1.PhaseUpgrading
	case cachev1alpha1.OperationSwitchover:
		return cachev1alpha1.PhaseRunning
	case cachev1alpha1.OperationRestore:
		// The cluster is built again from a backup; no client is served.
		return cachev1alpha1.PhaseInitializing
	}
	return ""
}

func operationMessage(op *cachev1alpha1.OperationStatus) string {
	msg := fmt.Sprintf("%s %s", op.Type, op.ID)
	if op.Step != "" {
		msg += ", step " + op.Step
	}
	if op.Reason != "" {
		msg += ": " + op.Reason
	}
	return msg
}

// blockedRollout applies day-two's verdict on the change spec asks for: a
// pre-check that failed or an upgrade rolled back. The pods keep running
// what they ran; Stalled says what to change.
func blockedRollout(cc *cachev1alpha1.CacheCluster) {
	r := cc.Status.Rollout
	if r == nil || r.Blocked == nil || r.Blocked.Target != renderer.ValuesKey(renderer.SpecValues(cc)) {
		return
	}
	gen := cc.Generation
	setCondition(cc, cachev1alpha1.ConditionStalled, metav1.ConditionTrue, r.Blocked.Reason, r.Blocked.Message, gen)
	setCondition(cc, cachev1alpha1.ConditionReady, metav1.ConditionFalse, r.Blocked.Reason, r.Blocked.Message, gen)
	removeCondition(cc, cachev1alpha1.ConditionReconciling)
}

func keepTransitions(cc *cachev1alpha1.CacheCluster, orig []metav1.Condition) {
	for i, c := range cc.Status.Conditions {
		if o := meta.FindStatusCondition(orig, c.Type); o != nil && o.Status == c.Status {
			cc.Status.Conditions[i].LastTransitionTime = o.LastTransitionTime
		}
	}
}

// nodesOf lists the pods by name; the list holds no value that changes on
// every probe.
func nodesOf(pods []corev1.Pod) []cachev1alpha1.NodeStatus {
	nodes := make([]cachev1alpha1.NodeStatus, 0, len(pods))
	for _, p := range pods {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		nodes = append(nodes, cachev1alpha1.NodeStatus{
			PodName: p.Name,
			Role:    p.Labels[cachev1alpha1.LabelRole],
			Address: p.Status.PodIP,
			Ready:   ready,
		})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].PodName < nodes[j].PodName })
	if len(nodes) == 0 {
		return nil
	}
	return nodes
}

// setCondition sets a condition; the transition time changes only when the
// status does, so an unchanged condition causes no status write.
func setCondition(cc *cachev1alpha1.CacheCluster, t string, st metav1.ConditionStatus, reason, msg string, gen int64) {
	meta.SetStatusCondition(&cc.Status.Conditions, metav1.Condition{
		Type: t, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen,
	})
}

// ensureCondition sets a condition only if it is absent.
func ensureCondition(cc *cachev1alpha1.CacheCluster, t string, st metav1.ConditionStatus, reason, msg string, gen int64) {
	if meta.FindStatusCondition(cc.Status.Conditions, t) == nil {
		setCondition(cc, t, st, reason, msg, gen)
	}
}

func removeCondition(cc *cachev1alpha1.CacheCluster, t string) {
	meta.RemoveStatusCondition(&cc.Status.Conditions, t)
}

func conditionMessage(cc *cachev1alpha1.CacheCluster, t string) string {
	if c := meta.FindStatusCondition(cc.Status.Conditions, t); c != nil {
		return c.Message
	}
	return ""
}
