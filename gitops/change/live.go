package change

import (
	"fmt"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// Live is what the running cluster says, for a prediction.
type Live struct {
	// Master is the pod that is master now; empty means ordinal 0.
	Master string
	// Notes are facts about the live cluster a reviewer should see.
	Notes []string
	// Object is the live CacheCluster as the API server returned it, nil
	// when it was not read. When set, a prediction starts from its spec.
	Object *cachev1alpha1.CacheCluster
}

// LiveOf reads the spec, the master and the running operation from a
// CacheCluster as the API server returned it.
func LiveOf(got *cachev1alpha1.CacheCluster) Live {
	st := Live{Master: got.Status.CurrentMaster, Object: got}
	if op := got.Status.Operation; op != nil {
		st.Notes = append(st.Notes, fmt.Sprintf("live: %s %s is in progress (%s); this change runs after it", op.Type, op.ID, op.Reason))
	}
	if got.Status.Phase != "" && got.Status.Phase != cachev1alpha1.PhaseRunning {
		st.Notes = append(st.Notes, fmt.Sprintf("live: the cluster is %s", got.Status.Phase))
	}
	return st
}

// Unread is the Live of a cluster that could not be read: the prediction
// assumes the master on ordinal 0 and says so.
func Unread(namespace, name string, err error) Live {
	return Live{Notes: []string{fmt.Sprintf("live: %s/%s not read (%v); the master is assumed on ordinal 0", namespace, name, err)}}
}
