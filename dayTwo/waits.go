package daytwo

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cacheops/cacheops/dayTwo/plan"
)

// waits remembers the wait each cluster was last logged in, so a wait is
// logged (at info) when it begins or changes, not at every look while it
// lasts: a failover that took 10 s in the scale benchmark left nothing in
// the log for those 10 s, as every wait was logged at debug only.
type waits struct {
	mu sync.Mutex
	m  map[types.NamespacedName]string
}

// changed records a's wait for the cluster and tells whether it differs
// from the one logged last. Two waits are the same when they wait for the
// same pod for the same reason, whatever numbers the reason carries (keys
// left to move, a deadline): those change while the wait lasts.
func (w *waits) changed(key types.NamespacedName, a plan.Action) bool {
	k := a.Pod + "\x00" + withoutNumbers(a.Reason)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]string{}
	}
	if w.m[key] == k {
		return false
	}
	w.m[key] = k
	return true
}

// ended: the cluster took a step or has nothing to do; its next wait is
// logged.
func (w *waits) ended(key types.NamespacedName) {
	w.mu.Lock()
	delete(w.m, key)
	w.mu.Unlock()
}

// withoutNumbers replaces every run of digits with '#'.
func withoutNumbers(s string) string {
	var b strings.Builder
	digits := false
	for _, r := range s {
		if r >= '0' && r <= '9' {
			if !digits {
				b.WriteByte('#')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	return b.String()
}
