package daytwo

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// errFailover is why a failover aborts a backup.
var errFailover = errors.New("a failover started")

// backupRuns tracks the dumps this process streams, so a failover can abort
// one and a restarted operator knows none runs.
type backupRuns struct {
	mu   sync.Mutex
	runs map[types.NamespacedName]backupRun // by CacheBackup
	wg   sync.WaitGroup
}

type backupRun struct {
	cluster string
	cancel  context.CancelCauseFunc
}

func (b *backupRuns) running(key types.NamespacedName) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.runs[key]
	return ok
}

// add records a run; false when one runs for the CacheBackup already.
func (b *backupRuns) add(key types.NamespacedName, cluster string, cancel context.CancelCauseFunc) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.runs[key]; ok {
		return false
	}
	if b.runs == nil {
		b.runs = map[types.NamespacedName]backupRun{}
	}
	b.runs[key] = backupRun{cluster: cluster, cancel: cancel}
	b.wg.Add(1)
	return true
}

func (b *backupRuns) done(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.runs, key)
	b.wg.Done()
}

// cancel cancels the runs that match.
func (b *backupRuns) cancel(match func(types.NamespacedName, backupRun) bool, cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for key, run := range b.runs {
		if match(key, run) {
			run.cancel(cause)
		}
	}
}

// abortOne cancels the run of one CacheBackup.
func (b *backupRuns) abortOne(backup types.NamespacedName, cause error) {
	b.cancel(func(key types.NamespacedName, _ backupRun) bool { return key == backup }, cause)
}

// abort cancels the runs of a cluster.
func (b *backupRuns) abort(cluster types.NamespacedName, cause error) {
	b.cancel(func(key types.NamespacedName, run backupRun) bool {
		return key.Namespace == cluster.Namespace && run.cluster == cluster.Name
	}, cause)
}

// Start waits for the manager to stop, then cancels every run and waits
// (10 s at most) for them to record their end, so a new leader does not
// start a second attempt while this one still uploads.
func (b *backupRuns) Start(ctx context.Context) error {
	<-ctx.Done()
	b.cancel(func(types.NamespacedName, backupRun) bool { return true }, errors.New("the operator is stopping"))
	ended := make(chan struct{})
	go func() { b.wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
	}
	return nil
}

// NeedLeaderElection: the runs belong to the leader.
func (b *backupRuns) NeedLeaderElection() bool { return true }
