package plan

import (
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
	"github.com/cacheops/cacheops/renderer"
)

// simulateSharded is Simulate for a sharded cluster: a change of the shard
// count is described by its slot moves (simulateReshard); a change of what
// the pods run is played on a model of the cluster in head's layout, each
// shard served by the master status.shards names (else its first pod),
// with the same planner the controller runs.
func simulateSharded(base, head *cachev1alpha1.CacheCluster, approved cachev1alpha1.RolloutValues, templateChanged bool) ([]Action, error) {
	var out []Action
	if base.IsSharded() && base.ShardCount() > 0 && head.ShardCount() != base.ShardCount() {
		out = append(out, simulateReshard(base, head))
	}
	w := newShardWorld(base, head, approved)
	if templateChanged {
		w.rev++
		w.s.StatefulSet.UpdateRevision = fmt.Sprintf("r%d", w.rev)
	}
	return play(out, &w.s, w.apply, 2000)
}

// shardWorld is a simulated sharded cluster: every pod answers, every
// replica is in sync, every step succeeds at once.
type shardWorld struct {
	s   Snapshot
	rev int
	// nodes are the pods' nodes by pod name: what CLUSTER NODES says of
	// each.
	nodes map[string]*probe.ClusterNode
	// params are the cluster parameters each node runs, by pod: base's,
	// spec's once the pod restarted (its redis.conf has them).
	params map[string]map[string]string
}

func newShardWorld(base, head *cachev1alpha1.CacheCluster, approved cachev1alpha1.RolloutValues) *shardWorld {
	n, pps := int(head.ShardCount()), int(head.PodsPerShard())
	approved.Replicas = int32(n * pps)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &shardWorld{rev: 1, nodes: map[string]*probe.ClusterNode{}, params: map[string]map[string]string{}}
	w.s = Snapshot{
		Name: head.Name, Now: now, ProbeTimeout: time.Second, AutoFailover: true, StepDeadline: time.Hour,
		Approved: approved.DeepCopy(), Spec: renderer.SpecValues(head),
		Sharded:     &ShardedState{Shards: n, PodsPerShard: pps, Parameters: renderer.ClusterParameters(head)},
		StatefulSet: &StatefulSetState{Settled: true, TemplateKey: renderer.TemplateKey(approved), Replicas: approved.Replicas, UpdateRevision: "r1"},
	}
	masters := map[int]string{}
	for _, sh := range base.Status.Shards {
		if int(sh.Index) < n && sh.Master != "" {
			masters[int(sh.Index)] = sh.Master
		}
	}
	for i := range n {
		if _, ok := masters[i]; !ok {
			masters[i] = fmt.Sprintf("%s-%d", head.Name, i*pps)
		}
	}
	for o := range n * pps {
		name := fmt.Sprintf("%s-%d", head.Name, o)
		w.nodes[name] = &probe.ClusterNode{ID: fmt.Sprintf("%040d", o+1), IP: fmt.Sprintf("10.1.0.%d", o+1)}
		w.params[name] = renderer.ClusterParameters(base)
	}
	for i := range n {
		m := w.nodes[masters[i]]
		m.Master, m.Slots = true, []probe.SlotRange{EvenSlots(i, n)}
		for r := range pps {
			name := fmt.Sprintf("%s-%d", head.Name, i*pps+r)
			if name != masters[i] {
				w.nodes[name].MasterID = m.ID
			}
		}
	}
	for o := range n * pps {
		w.s.Pods = append(w.s.Pods, w.pod(fmt.Sprintf("%s-%d", head.Name, o)))
	}
	w.s.Sharded.Recorded = newShardedView(w.s).Shards()
	return w
}

// pod is a pod of the current revision, as its node and INFO report it.
func (w *shardWorld) pod(name string) PodState {
	n := w.nodes[name]
	p := PodState{Name: name, IP: n.IP, Observed: true, Ready: true, Revision: w.s.StatefulSet.UpdateRevision, Created: w.s.Now,
		Obs: probe.Observation{Pod: name, IP: n.IP, Reachable: true, LastSeen: w.s.Now, Keys: 1, Offset: 100,
			RunID: name + "@" + w.s.Now.Format(time.RFC3339)}}
	w.refresh(&p)
	return p
}

// refresh sets what a pod reports from its node: its role, its label,
// and its view of the cluster.
func (w *shardWorld) refresh(p *PodState) {
	n := w.nodes[p.Name]
	p.Obs.Role, p.Obs.MasterHost, p.Obs.MasterLinkUp, p.RoleLabel = "master", "", false, cachev1alpha1.RoleMaster
	for _, m := range w.nodes {
		if n.MasterID != "" && m.ID == n.MasterID {
			p.Obs.Role, p.Obs.MasterHost, p.Obs.MasterLinkUp, p.RoleLabel = "slave", m.IP, true, cachev1alpha1.RoleReplica
		}
	}
	v := &probe.ClusterView{State: "ok", SlotsAssigned: cachev1alpha1.SlotCount, Myself: *n, Parameters: maps.Clone(w.params[p.Name])}
	for _, m := range w.nodes {
		v.Nodes = append(v.Nodes, *m)
	}
	v.KnownNodes = len(v.Nodes)
	p.Obs.Cluster = v
}

func (w *shardWorld) refreshAll() {
	for i := range w.s.Pods {
		w.refresh(&w.s.Pods[i])
	}
}

// approve models day-one rendering the approved values: a new template is
// a new revision of the StatefulSet.
func (w *shardWorld) approve(v cachev1alpha1.RolloutValues) {
	w.s.Approved = v.DeepCopy()
	sts := w.s.StatefulSet
	if key := renderer.TemplateKey(v); key != sts.TemplateKey {
		w.rev++
		sts.TemplateKey, sts.UpdateRevision = key, fmt.Sprintf("r%d", w.rev)
	}
}

func (w *shardWorld) apply(a Action) {
	s := &w.s
	// A step takes longer than any wait between steps (SwitchoverSettle).
	s.Now = s.Now.Add(2 * SwitchoverSettle)
	switch a.Type {
	case ActionApprove, ActionPrecheckPass, ActionApplyConfig, ActionRollback:
		w.approve(*a.Values)
	case ActionEndShardSwitchover, ActionCompleteOperation:
		if a.Values != nil {
			w.approve(*a.Values)
		}
	}
	switch a.Type {
	case ActionStartOperation:
		op := a.Operation.DeepCopy()
		op.ID, op.StartedAt, op.StepStartedAt = "plan", metav1.NewTime(s.Now), timeRef(s.Now)
		s.Operation = op
	case ActionNextStep, ActionPrecheckPass, ActionRollback, ActionEndShardSwitchover:
		s.Operation = a.Operation.DeepCopy()
		s.Precheck = nil
	case ActionPrecheckStart:
		s.Precheck = &PrecheckState{TemplateKey: renderer.TemplateKey(*a.Values), Ready: true}
	case ActionPrecheckFail, ActionApplyConfig, ActionCompleteOperation:
		s.Operation, s.Precheck = nil, nil
		if a.Type == ActionApplyConfig {
			for _, params := range w.params {
				for k, v := range a.Config {
					if _, ok := params[k]; ok {
						params[k] = v
					}
				}
			}
			w.refreshAll()
		}
	case ActionRefuseChange:
		s.Blocked = &cachev1alpha1.RolloutBlock{Target: renderer.ValuesKey(*a.Values), Reason: cachev1alpha1.ReasonDowngradeRefused, Message: a.Reason}
	case ActionCheckData:
		p, _ := s.Pod(a.Pod)
		if s.DataChecks == nil {
			s.DataChecks = map[string]DataCheck{}
		}
		s.DataChecks[a.Pod] = DataCheck{RunID: p.Obs.RunID, Master: a.Master, Sampled: 1, At: s.Now}
	case ActionRestartPod:
		op := s.Operation.DeepCopy()
		op.StepStartedAt = timeRef(s.Now)
		s.Operation = op
		// The restarted server reads the cluster parameters spec asks for.
		w.params[a.Pod] = maps.Clone(s.Sharded.Parameters)
		for i := range s.Pods {
			if s.Pods[i].Name == a.Pod {
				s.Pods[i] = w.pod(a.Pod)
			}
		}
	case ActionShardFailover:
		// The replica takes the slots; the old master and the shard's
		// other replicas follow it.
		to, from := w.nodes[a.Pod], w.nodes[a.Master]
		to.Master, to.MasterID, to.Slots = true, "", from.Slots
		for _, n := range w.nodes {
			if n.MasterID == from.ID {
				n.MasterID = to.ID
			}
		}
		from.Master, from.MasterID, from.Slots = false, to.ID, nil
		w.refreshAll()
	case ActionUnlabel, ActionLabelMaster, ActionLabelReplica:
		applyRoleStep(s, a)
	case ActionRecordShards:
		s.Sharded.Recorded = a.Shards
	}
}
