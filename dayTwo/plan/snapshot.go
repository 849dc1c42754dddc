package plan

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/probe"
)

// PodState is one pod as the planner sees it: from the API server and from
// the last probe of its Redis.
type PodState struct {
	Name      string
	UID       types.UID
	IP        string
	RoleLabel string
	Deleting  bool
	// Observed is false until the prober has looked at the pod once.
	Observed bool
	Obs      probe.Observation
	// NotReadySince is when the pod's Ready condition turned False; zero
	// while it is Ready or has not started.
	NotReadySince time.Time
	// Ready is the pod's Ready condition.
	Ready bool
	// Revision is the StatefulSet revision the pod was made from.
	Revision string
	// Created is the pod's creation time.
	Created time.Time
}

// Ordinal is the StatefulSet ordinal of the pod (name-N).
func (p PodState) Ordinal() int {
	i := strings.LastIndexByte(p.Name, '-')
	n, err := strconv.Atoi(p.Name[i+1:])
	if err != nil {
		return 1 << 30
	}
	return n
}

// Snapshot is everything the planner decides on. Plan is a pure function of
// it, so a decision can be tested, logged and replayed.
type Snapshot struct {
	// Name of the CacheCluster; pods are Name-0, Name-1, ...
	Name         string
	Now          time.Time
	ProbeTimeout time.Duration
	AutoFailover bool
	// CurrentMaster and Operation come from the CacheCluster status.
	CurrentMaster string
	// MasterAddress is the address the current master served writes at
	// (status.currentMasterAddress): the one its replicas follow, also
	// after its pod came back with another IP. Empty when not recorded.
	MasterAddress string
	Operation     *cachev1alpha1.OperationStatus
	Pods          []PodState
	// RecreateAfter is how long a pod may stay not-Ready before it is
	// recreated; zero turns recreation off.
	RecreateAfter time.Duration

	// Spec is what spec asks the pods to run; Approved is what day-two
	// approved (status.rollout), nil until the first approval.
	Spec     cachev1alpha1.RolloutValues
	Approved *cachev1alpha1.RolloutValues
	Blocked  *cachev1alpha1.RolloutBlock
	// StatefulSet is the StatefulSet as last observed; nil if absent.
	StatefulSet *StatefulSetState
	// Precheck is the temporary pod of an upgrade pre-check; nil if absent.
	Precheck *PrecheckState
	// DataChecks are the last data checks of the pods (by name): what a
	// sample of the master's keys found on each replica.
	DataChecks map[string]DataCheck
	// SwitchoverTo is a requested switchover (annotation), empty if none.
	SwitchoverTo string
	// StepDeadline bounds a pre-check and how long an upgraded pod may
	// take to become ready and in sync.
	StepDeadline time.Duration
	// SwitchoverIssuedAt is when Redis FAILOVER was last sent for the
	// switchover in progress; zero if not (or not since a restart).
	SwitchoverIssuedAt time.Time
	// RestorePending: the cluster was created from a backup whose restore
	// has not been checked yet.
	RestorePending bool
	// Backup is the CacheBackup of the Backup operation in progress.
	Backup *BackupState
	// PendingBackup is the oldest CacheBackup waiting for its turn.
	PendingBackup string

	// AutoRestore is spec.backup.autoRestore.
	AutoRestore bool
	// DataLost: the DataLost condition is True; RestoreFailed: because a
	// recovery's restore failed its check (no second automatic attempt).
	DataLost, RestoreFailed bool
	// AcceptDataLoss: the annotation accepting a data loss is set.
	AcceptDataLoss bool
	// LatestBackup is the newest completed CacheBackup of the cluster; nil
	// when there is none.
	LatestBackup *RestorePoint
	// RestoreConfig is the restore ConfigMap; nil when absent.
	RestoreConfig *RestoreConfig

	// Sharded is the layout of a sharded cluster; nil in replication
	// mode. The sharded planner (sharded.go) decides for it.
	Sharded *ShardedState

	// TLS is the certificate of a cluster with spec.tls; nil without.
	TLS *TLSState

	// UsersRecheckAt is when spec.users must be looked at again: the
	// soonest end of a password rotation (the previous password is
	// removed then). Zero when no rotation runs: a changed password in a
	// user's Secret wakes the controller through the Secrets' watch.
	UsersRecheckAt time.Time
}

// StatefulSetState is what the planner needs of the StatefulSet.
type StatefulSetState struct {
	// Settled: the controller observed the latest spec.
	Settled bool
	// TemplateKey identifies the pod template (renderer.TemplateKey).
	TemplateKey    string
	Replicas       int32
	UpdateRevision string
	// RestoreInit: the pod template has the restore init container.
	RestoreInit bool
}

// PrecheckState is the pre-check pod as last observed.
type PrecheckState struct {
	// TemplateKey is the template the pod was made from.
	TemplateKey string
	Ready       bool
	// Failure says why the pod cannot start; empty while it may still.
	Failure string
	// Seed is the copy of a cluster pod's data the pod started on; nil
	// for a pre-check on an empty folder, or while the copy is not taken
	// yet.
	Seed *SeedState
}

// SeedState is a pre-check pod's copy of the data: what the dump held (its
// seed init container's report) and what the server loaded from it.
type SeedState struct {
	// Source is the address the dump was taken from.
	Source string
	// Keys and ExpiringKeys count the dump's database DB; Keys is -1 when
	// the dump's header could not be read.
	Keys, ExpiringKeys int64
	DB                 int
	// Loaded is DBSIZE of database DB on the started pre-check server;
	// -1 until it was read (LoadErr says why not, when it failed).
	Loaded  int64
	LoadErr string
}

func (s Snapshot) Pod(name string) (PodState, bool) {
	for _, p := range s.Pods {
		if p.Name == name {
			return p, true
		}
	}
	return PodState{}, false
}

// down tells whether a pod has been unreachable for longer than the probe
// timeout (or is gone).
func (s Snapshot) down(name string) bool {
	p, ok := s.Pod(name)
	if !ok || p.Deleting {
		return true
	}
	if !p.Observed {
		return false
	}
	if p.Obs.Reachable {
		return false
	}
	since := silentFrom(p)
	return since.IsZero() || s.Now.Sub(since) > s.ProbeTimeout
}

// silentFrom is when a pod that does not answer fell silent: when it last
// answered, or, when it has not answered since the operator started, when
// its probes began to fail.
func silentFrom(p PodState) time.Time {
	if p.Obs.LastSeen.IsZero() {
		return p.Obs.FailingSince
	}
	return p.Obs.LastSeen
}

// downAt is when a pod that does not answer will be down (see down); zero
// for a pod that answers, or is not observed.
func (s Snapshot) downAt(p PodState) time.Time {
	if !p.Observed || p.Obs.Reachable {
		return time.Time{}
	}
	since := silentFrom(p)
	if since.IsZero() {
		return time.Time{}
	}
	// down asks for more than the timeout.
	return since.Add(s.ProbeTimeout + time.Millisecond)
}

// StartedAsReplica: the pod runs as it started, a replica of the
// placeholder address in its configuration (cachev1alpha1.StartupMasterHost),
// not yet promoted or pointed at a master by the operator.
func StartedAsReplica(p PodState) bool {
	return p.Obs.Role == "slave" && p.Obs.MasterHost == cachev1alpha1.StartupMasterHost
}

func Healthy(p PodState) bool {
	return p.Observed && p.Obs.Reachable && !p.Obs.Loading && !p.Deleting
}

func SortedPods(s Snapshot) []PodState {
	pods := append([]PodState(nil), s.Pods...)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Ordinal() < pods[j].Ordinal() })
	return pods
}
