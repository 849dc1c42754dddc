package probe

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/access"
)

// Observation is what one probe of one pod's Redis saw. LastSeen is the
// last time the pod answered; it is what failure detection measures.
// FailingSince is when the probes of a pod that does not answer began to
// fail: a pod not seen since this process started (LastSeen zero) is
// judged from it, so a restarted operator whose first probes time out
// does not take a live master for a dead one.
type Observation struct {
	Pod          string
	IP           string
	Reachable    bool
	LastSeen     time.Time
	FailingSince time.Time
	Err          string
	// MissedWait is, for a pod that does not answer, the longest a probe
	// of it waited in vain since it last answered: the deadline of the
	// most patient probe that failed (a refused connection counts its
	// whole deadline, as waiting would not have changed it; a probe held
	// back by the redial backoff waited nothing). The planner fails a
	// master over only after a probe that waited the whole probe timeout
	// (the periodic ones wait two periods, at most half of it): a master that
	// answers slower than that, but within the timeout, is slow, not down.
	MissedWait time.Duration
	// MissedWaitSent is when the probe that waited MissedWait was sent
	// (the latest of them when several waited as long): a restarted
	// master is judged on replicas waited for since its start.
	MissedWaitSent time.Time
	// Slow: every probe of a pod that does not answer, since it last
	// answered, ran out of time; none was refused, broken, or held back
	// by the redial backoff. Such a pod may be alive on a loaded node; a
	// killed one refuses at once.
	Slow bool
	// LookingSince is when a last look at the pod (Prober.Look) was sent,
	// while it has not ended; zero otherwise.
	LookingSince time.Time
	// ProbedAt is when the probe was sent: an answer to an older probe
	// never replaces what a newer one saw.
	ProbedAt time.Time

	// Role is "master" or "slave", as INFO replication says.
	Role              string
	MasterHost        string
	MasterLinkUp      bool
	ConnectedReplicas int
	// Offset is master_repl_offset on a master, slave_repl_offset on a
	// replica: how much of the replication stream the pod holds.
	Offset int64
	// ReplID is master_replid: the history the pod holds (a replica: the
	// one it follows). ReplID2 and SecondReplOffset are master_replid2 and
	// second_repl_offset: the history a promoted pod continued, up to
	// the offset where it took over.
	ReplID           string
	ReplID2          string
	SecondReplOffset int64
	// LinkDownSeconds is master_link_down_since_seconds on a replica whose
	// link is down: how long it has not heard from its master; -1 when
	// it never synced in this run, 0 while the link is up.
	LinkDownSeconds int64
	// MasterLastIOSeconds is master_last_io_seconds_ago on a replica, as
	// its last answer told (at ProbedAt while it answers): how long ago,
	// in whole seconds of its clock, it last read anything from its master
	// (the stream, or a ping every repl-ping-replica-period); -1 when it
	// has no link, or did not tell.
	MasterLastIOSeconds int64
	Keys                int64
	Loading             bool
	// UptimeSeconds tells a restarted server from one that kept running.
	UptimeSeconds int64
	// RunID is run_id: it changes with every start of redis-server.
	RunID string
	// LostData: this redis-server started empty while the run before it
	// in this pod, as the prober saw it last, held keys: its data folder
	// was lost or wiped. It stays so for the run, whatever is written to
	// it since, until it syncs as a replica from a pod that kept its data.
	// An emptied dataset (FLUSHALL, expiry) is not a loss: the run did not
	// change. Known only from what this operator process saw.
	LostData bool
	// FailoverState is master_failover_state: no-failover,
	// waiting-for-sync or failover-in-progress.
	FailoverState string
	// UsedMemory and MaxMemory are used_memory and maxmemory (0:
	// unlimited), in bytes.
	UsedMemory, MaxMemory int64
	// Saving and Rewriting are rdb_bgsave_in_progress and
	// aof_rewrite_in_progress: a SYNC to this pod waits for them (a save
	// it cannot attach to, or any rewrite) before its snapshot starts.
	Saving, Rewriting bool
	// Cluster is the node's view of a sharded cluster; nil for a
	// replication cluster, or when CLUSTER INFO or NODES did not answer.
	Cluster *ClusterView
}

// Wake asks the day-two controller to look at a cluster again. Urgent:
// the pod last seen as master does not answer, so the cluster may have no
// master; it goes before routine work.
type Wake struct {
	Key    types.NamespacedName
	Urgent bool
}

// Target is a pod to probe.
type Target struct {
	Pod string
	IP  string
	// Cluster: the pod runs in cluster mode (a sharded cluster); the probe
	// also reads CLUSTER INFO and CLUSTER NODES.
	Cluster bool
	// Shard is the index of the pod's shard (a sharded cluster), for the
	// per-shard series.
	Shard int
}

// Prober polls every pod of every CacheCluster it is told about, one
// goroutine per cluster and one per pod, each pod on its own persistent
// connection and its own clock, records each answer as it comes, and wakes
// the reconciler through a channel when something that matters changed
// (reachability, role, master, link). It never wakes it for offsets,
// which change on every write.
type Prober struct {
	events chan event.TypedGenericEvent[Wake]

	mu       sync.Mutex
	clusters map[types.NamespacedName]*clusterProbe
}

type clusterProbe struct {
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	targets []Target
	access  access.Config
	period  time.Duration
	results map[string]Observation
	// runs remembers, per pod name, the last run of redis-server seen
	// there, across pod recreation (a lost volume comes back as a new
	// pod with the same name).
	runs map[string]run
	// changed wakes a loop that has no target when targets are set.
	changed chan struct{}
	// looks are the last looks in flight, by pod: when each was sent.
	looks map[string]time.Time
	// answered are the pods that answered a last look since the
	// controller last took them (TakeAnsweredLooks).
	answered []string
	// owed: a wake-up found the controller's channel full; the next probe
	// sends it.
	owed atomic.Bool
}

// run is one start of redis-server in a pod, as last observed.
type run struct {
	id   string
	keys int64
	lost bool
}

// NewProber returns a prober whose wake-ups arrive on Events().
func NewProber() *Prober {
	return &Prober{events: make(chan event.TypedGenericEvent[Wake], 1024), clusters: map[types.NamespacedName]*clusterProbe{}}
}

// Events is the channel source for the reconciler.
func (p *Prober) Events() <-chan event.TypedGenericEvent[Wake] { return p.events }

// Ensure starts or updates the probing of one cluster.
func (p *Prober) Ensure(cc *cachev1alpha1.CacheCluster, targets []Target, acc access.Config, period time.Duration) {
	key := types.NamespacedName{Namespace: cc.Namespace, Name: cc.Name}
	p.mu.Lock()
	cp, ok := p.clusters[key]
	if !ok {
		ctx, cancel := context.WithCancel(context.Background())
		cp = &clusterProbe{ctx: ctx, cancel: cancel, results: map[string]Observation{}, runs: map[string]run{}, changed: make(chan struct{}, 1), looks: map[string]time.Time{}}
		p.clusters[key] = cp
		cp.set(targets, acc, period)
		go p.run(ctx, key, cp)
	}
	p.mu.Unlock()
	cp.set(targets, acc, period)
}

func (cp *clusterProbe) set(targets []Target, acc access.Config, period time.Duration) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.targets, cp.access, cp.period = targets, acc, period
	select {
	case cp.changed <- struct{}{}:
	default:
	}
	keep := map[string]bool{}
	for _, t := range targets {
		keep[t.Pod] = true
	}
	for pod, o := range cp.results {
		// A pod that is gone, or came back with another address, starts
		// over.
		if !keep[pod] {
			delete(cp.results, pod)
			continue
		}
		for _, t := range targets {
			if t.Pod == pod && t.IP != o.IP {
				delete(cp.results, pod)
			}
		}
	}
}

// Forget stops probing a cluster (it was deleted or paused).
func (p *Prober) Forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cp, ok := p.clusters[key]; ok {
		cp.cancel()
		delete(p.clusters, key)
	}
}

// AcceptLoss forgets that the pods of a cluster lost their data: a loss a
// person accepted is not found again.
func (p *Prober) AcceptLoss(key types.NamespacedName) {
	p.withRuns(key, func(runs map[string]run) {
		for pod, r := range runs {
			r.lost = false
			runs[pod] = r
		}
	})
}

// ForgetRuns drops what the prober remembers of the pods keep refuses
// (ordinals scaled away): a pod made there later starts on a new volume,
// which is no loss.
func (p *Prober) ForgetRuns(key types.NamespacedName, keep func(pod string) bool) {
	p.withRuns(key, func(runs map[string]run) {
		for pod := range runs {
			if !keep(pod) {
				delete(runs, pod)
			}
		}
	})
}

func (p *Prober) withRuns(key types.NamespacedName, f func(map[string]run)) {
	cp := p.cluster(key)
	if cp == nil {
		return
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	f(cp.runs)
	for pod, o := range cp.results {
		o.LostData = cp.runs[pod].lost
		cp.results[pod] = o
	}
}

// cluster is the probing of one cluster; nil when there is none.
func (p *Prober) cluster(key types.NamespacedName) *clusterProbe {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clusters[key]
}

// Observations returns the latest observation of every probed pod.
func (p *Prober) Observations(key types.NamespacedName) map[string]Observation {
	cp := p.cluster(key)
	out := map[string]Observation{}
	if cp == nil {
		return out
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for k, v := range cp.results {
		v.LookingSince = cp.looks[k]
		out[k] = v
	}
	return out
}

// Stop ends all probing.
func (p *Prober) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, cp := range p.clusters {
		cp.cancel()
		delete(p.clusters, k)
	}
}

// run keeps one probing goroutine per pod of the cluster (podLoop), each
// on its own connection and its own clock: a pod slow to answer delays
// neither the recording of the others' answers nor how often they are
// probed. It also sets the per-shard series of a sharded cluster every
// period.
func (p *Prober) run(ctx context.Context, key types.NamespacedName, cp *clusterProbe) {
	loops := map[string]*podLoop{}
	defer func() {
		for _, l := range loops {
			l.cancel()
		}
	}()
	// shards: the shards whose series were set last; due: when they are
	// set next (Ensure, called on every reconcile, does not put it off).
	var shards map[int]bool
	var due time.Time
	for {
		cp.mu.Lock()
		targets := append([]Target(nil), cp.targets...)
		spec := podLoopSpec{access: cp.access, period: cp.period}
		cp.mu.Unlock()
		p.keepLoops(ctx, key, cp, loops, targets, spec)

		// A cluster whose pods are not in cluster mode, or have no address
		// yet, waits for Ensure (it does not tick every period).
		var tick <-chan time.Time
		if len(targets) > 0 && targets[0].Cluster {
			if due.IsZero() {
				due = time.Now().Add(spec.period)
			}
			tick = time.After(time.Until(due))
		}
		select {
		case <-ctx.Done():
			return
		case <-cp.changed:
		case <-tick:
			shards = recordShardMetrics(key, ShardFiguresOf(targets, cp.snapshot()), shards)
			due = time.Now().Add(spec.period)
		}
	}
}

// podLoopSpec is what a pod's probing loop was started with; a loop whose
// spec changed is replaced (a new address, password, TLS or period).
type podLoopSpec struct {
	target Target
	access access.Config
	period time.Duration
}

// podLoop is the probing of one pod. Stopped (cancel), it records
// nothing more; a probe in flight is not interrupted, so its connection
// is closed when that probe ends, within its deadline, and the loop that
// replaces it does not wait for that.
type podLoop struct {
	spec   podLoopSpec
	cancel context.CancelFunc
}

// keepLoops stops the loops of pods that are gone or changed and starts
// one for every new target with an address.
func (p *Prober) keepLoops(ctx context.Context, key types.NamespacedName, cp *clusterProbe, loops map[string]*podLoop, targets []Target, spec podLoopSpec) {
	want := make(map[string]podLoopSpec, len(targets))
	for _, t := range targets {
		if t.IP != "" {
			s := spec
			s.target = t
			want[t.Pod] = s
		}
	}
	for pod, l := range loops {
		if s, ok := want[pod]; !ok || s != l.spec {
			l.cancel()
			delete(loops, pod)
		}
	}
	for pod, s := range want {
		if _, ok := loops[pod]; ok {
			continue
		}
		lctx, cancel := context.WithCancel(ctx)
		loops[pod] = &podLoop{spec: s, cancel: cancel}
		go p.probePod(lctx, key, cp, s)
	}
	for _, t := range targets {
		if t.IP == "" && cp.record(Observation{Pod: t.Pod, ProbedAt: time.Now(), Err: "pod has no address"}) {
			p.wake(key, cp)
		}
	}
}

// probePod probes one pod every period on one persistent connection,
// records each answer as it comes and wakes the controller when it is
// news (or when an earlier wake-up found the channel full).
func (p *Prober) probePod(ctx context.Context, key types.NamespacedName, cp *clusterProbe, s podLoopSpec) {
	c := newConn(s.target.IP, s.access)
	defer c.close()
	for {
		start := time.Now()
		o := probe(ctx, c, s.target, probeDeadlinePeriods*s.period, s.period)
		// A loop whose pod is gone or changed records nothing; keepLoops
		// stops it.
		if news, current := cp.recordIfCurrent(ctx, s.target, o); current {
			if o.Reachable {
				redisKeys.WithLabelValues(key.Namespace, key.Name, o.Pod).Set(float64(o.Keys))
			}
			if news || cp.owed.Load() {
				p.wake(key, cp)
			}
		}
		wait := s.period - time.Since(start)
		if wait < 10*time.Millisecond {
			wait = 10 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// wake tells the controller to look at the cluster, urgently when its
// master does not answer. A wake-up that finds the channel full is owed:
// the controller no longer looks at a waiting cluster every period and
// would otherwise hear of the change at its routine recheck, so the next
// probe of any of the cluster's pods sends it.
func (p *Prober) wake(key types.NamespacedName, cp *clusterProbe) {
	select {
	case p.events <- event.TypedGenericEvent[Wake]{Object: Wake{Key: key, Urgent: cp.masterUnreachable()}}:
		cp.owed.Store(false)
	default:
		cp.owed.Store(true)
	}
}

// probeDeadlinePeriods is a periodic probe's deadline, in periods. An
// answer that takes longer than one period (a busy machine: at 100
// clusters under load, answers within a period were missed often enough
// to fail healthy masters over) still counts; a frozen pod is still found
// unreachable within the probe timeout, which is four periods.
const probeDeadlinePeriods = 2

// record stores an observation and tells whether it is news the planner
// must hear about.
func (cp *clusterProbe) record(o Observation) bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.recordLocked(o)
}

// recordIfCurrent records what a probe of t saw (a pod's loop, a look, a
// refresh), unless ctx was cancelled (the loop was stopped, the cluster
// forgotten) or the pod is no longer one of the cluster's at t's address
// (gone, or back at another address): an answer from the old address
// must not replace what the new one says. It tells whether that is news,
// and whether it recorded.
func (cp *clusterProbe) recordIfCurrent(ctx context.Context, t Target, o Observation) (news, recorded bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.recordIfCurrentLocked(ctx, t, o)
}

// recordIfCurrentLocked is recordIfCurrent; the caller holds cp.mu.
func (cp *clusterProbe) recordIfCurrentLocked(ctx context.Context, t Target, o Observation) (news, recorded bool) {
	if ctx.Err() != nil || !slices.ContainsFunc(cp.targets, func(x Target) bool { return x.Pod == t.Pod && x.IP == t.IP }) {
		return false, false
	}
	return cp.recordLocked(o), true
}

// snapshot returns the latest observation of every pod.
func (cp *clusterProbe) snapshot() []Observation {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := make([]Observation, 0, len(cp.results))
	for _, o := range cp.results {
		out = append(out, o)
	}
	return out
}

// recordLocked is record; the caller holds cp.mu.
func (cp *clusterProbe) recordLocked(o Observation) bool {
	prev, had := cp.results[o.Pod]
	if had && prev.IP != o.IP {
		had = false
	}
	if had && !o.Reachable && !o.ProbedAt.After(prev.LastSeen) {
		// A failed probe sent before the pod's last answer came says
		// nothing newer than that answer, whatever came between. (A
		// look that answers on a loaded node was undone by the periodic
		// probe sent while it waited, which failed a moment later: the
		// failover step that needed the answer rarely saw it, and
		// looked again. A longer wait kept from before a master's last
		// answer judged it from before it answered.) The next probe
		// sent after the answer tells whether the pod still answers.
		return false
	}
	if had && o.ProbedAt.Before(prev.ProbedAt) && !answeredSince(prev, o) {
		// A periodic probe sent before a step and recorded after the
		// look the step took at its effect (Refresh) is stale. A look
		// that waited longer (Look, Refresh) and ends in vain after the
		// periodic probes sent during it still tells how long the pod
		// was waited for.
		return cp.recordStale(prev, o)
	}
	if !o.Reachable {
		o.FailingSince = o.ProbedAt
		if had && !prev.Reachable && !prev.FailingSince.IsZero() {
			o.FailingSince = prev.FailingSince
		}
		if o.MissedWait > 0 {
			o.MissedWaitSent = o.ProbedAt
		}
		if had && !prev.Reachable && prev.MissedWait > o.MissedWait {
			o.MissedWait, o.MissedWaitSent = prev.MissedWait, prev.MissedWaitSent
		}
		if had && !prev.Reachable && !prev.Slow {
			o.Slow = false
		}
	}
	if !o.Reachable && had {
		o.LastSeen = prev.LastSeen
		// Keep what we knew about the pod's data; only reachability
		// changed.
		o.Role, o.MasterHost, o.Offset, o.Keys, o.ReplID = prev.Role, prev.MasterHost, prev.Offset, prev.Keys, prev.ReplID
		o.ReplID2, o.SecondReplOffset, o.LinkDownSeconds = prev.ReplID2, prev.SecondReplOffset, prev.LinkDownSeconds
		// Whether its link was up, and whether it was loading, when it
		// last answered: a replica heard with its link down after its
		// master fell silent holds what it will hold (plan).
		o.MasterLinkUp, o.MasterLastIOSeconds, o.Loading = prev.MasterLinkUp, prev.MasterLastIOSeconds, prev.Loading
		o.Cluster = prev.Cluster
	}
	if o.Reachable && !o.Loading && o.RunID != "" {
		r := cp.runs[o.Pod]
		if r.id != o.RunID {
			r = run{id: o.RunID, lost: r.id != "" && r.keys > 0 && o.Keys == 0}
			if r.lost {
				ctrl.Log.WithName("prober").Info("redis-server restarted without the keys its previous run held", "pod", o.Pod, "runID", o.RunID, "previousKeys", cp.runs[o.Pod].keys)
			}
		}
		r.keys = o.Keys
		if r.lost && o.Keys > 0 && o.Role == "slave" && o.MasterLinkUp && cp.keptData(o.MasterHost) {
			// Synced from a pod that kept the data: it holds the data
			// again. Keys written after the loss (to a master that lost
			// its data, and replicated from it) are not the data.
			r.lost = false
		}
		cp.runs[o.Pod] = r
	}
	o.LostData = cp.runs[o.Pod].lost
	cp.results[o.Pod] = o
	// A master that does not answer is news every round: the planner
	// times its failure. Any other pod's silence is news when it begins
	// (significant) and when it ends; a replica that stays down, or a pod
	// that never answered yet (starting), does not wake the controller
	// every period.
	return !had || significant(prev, o) || (!o.Reachable && o.Role == "master")
}

// answeredSince: o, sent before prev, is an answer that came after prev
// (a failed probe) was sent. It is the newest word from the pod, recorded
// whole: the pod is alive, the waiting starts over, and what it holds is
// read from that answer. (A look at a replica slow on a loaded node
// answers after the shorter periodic probes sent during it fail; keeping
// only the time of that answer left the replica unreachable and without
// a look since a master's restart, so the master was never judged and
// the look was sent again, round after round.)
func answeredSince(prev, o Observation) bool {
	return !prev.Reachable && o.Reachable && o.LastSeen.After(prev.ProbedAt)
}

// recordStale keeps, of an observation older than the pod's latest, what
// is still news: a longer wait in vain. It tells whether the planner must
// hear of it. The caller holds cp.mu.
func (cp *clusterProbe) recordStale(prev, o Observation) bool {
	if prev.Reachable || o.Reachable ||
		!(o.MissedWait > prev.MissedWait || (o.MissedWait == prev.MissedWait && o.MissedWait > 0 && o.ProbedAt.After(prev.MissedWaitSent))) {
		return false
	}
	prev.MissedWait, prev.MissedWaitSent = o.MissedWait, o.ProbedAt
	cp.results[prev.Pod] = prev
	return true
}

// masterUnreachable tells whether a pod last seen as master did not
// answer its last probe.
func (cp *clusterProbe) masterUnreachable() bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, o := range cp.results {
		if o.Role == "master" && !o.Reachable {
			return true
		}
	}
	return false
}

// keptData tells whether the pod at ip runs redis-server in a run that did
// not lose its data. The caller holds cp.mu.
func (cp *clusterProbe) keptData(ip string) bool {
	for pod, o := range cp.results {
		if o.IP == ip {
			r, ok := cp.runs[pod]
			return ok && !r.lost
		}
	}
	return false
}

// Refresh probes one pod now and records what it sees, so the step after a
// change made to a pod's Redis is planned on its effect, not on the look
// before it.
func (p *Prober) Refresh(ctx context.Context, key types.NamespacedName, t Target, timeout time.Duration) {
	cp := p.cluster(key)
	if cp == nil {
		return
	}
	cp.mu.Lock()
	acc := cp.access
	cp.mu.Unlock()
	cp.recordIfCurrent(ctx, t, ProbeOnce(ctx, t, acc, timeout))
}

// Look sends one probe to a pod on a new connection that waits timeout
// for the answer, in the background, unless a look at the pod is already
// in flight: the last look at a master before a failover, which may wait
// as long as the probe timeout and so must not hold a worker. While it
// runs, the pod's observation carries LookingSince; its result is
// recorded as a probe's and the controller is woken (urgently) when it
// ends. A pod that answered is kept for TakeAnsweredLooks.
func (p *Prober) Look(key types.NamespacedName, t Target, timeout time.Duration) {
	cp := p.cluster(key)
	if cp == nil {
		return
	}
	cp.mu.Lock()
	if _, running := cp.looks[t.Pod]; running {
		cp.mu.Unlock()
		return
	}
	cp.looks[t.Pod] = time.Now()
	acc := cp.access
	cp.mu.Unlock()
	go func() {
		o := ProbeOnce(cp.ctx, t, acc, timeout)
		// The look ends and its answer is recorded at once: no snapshot
		// sees the pod neither looked at nor answered. A pod gone or
		// moved meanwhile starts over (set): its look is not recorded
		// under its new address.
		cp.mu.Lock()
		delete(cp.looks, t.Pod)
		_, recorded := cp.recordIfCurrentLocked(cp.ctx, t, o)
		if recorded && o.Reachable {
			cp.answered = append(cp.answered, t.Pod)
		}
		cp.mu.Unlock()
		if !recorded {
			return
		}
		select {
		case p.events <- event.TypedGenericEvent[Wake]{Object: Wake{Key: key, Urgent: true}}:
		case <-cp.ctx.Done():
		}
	}()
}

// TakeAnsweredLooks returns the pods that answered a last look since the
// last call, and forgets them.
func (p *Prober) TakeAnsweredLooks(key types.NamespacedName) []string {
	cp := p.cluster(key)
	if cp == nil {
		return nil
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := cp.answered
	cp.answered = nil
	return out
}

// significant tells changes the planner must react to.
func significant(a, b Observation) bool {
	return a.Reachable != b.Reachable || a.Role != b.Role || a.MasterHost != b.MasterHost ||
		a.MasterLinkUp != b.MasterLinkUp || a.Loading != b.Loading || a.ReplID != b.ReplID || a.FailoverState != b.FailoverState ||
		(a.Keys == 0) != (b.Keys == 0) || a.UptimeSeconds > b.UptimeSeconds || a.LostData != b.LostData ||
		a.Cluster.signature() != b.Cluster.signature()
}
