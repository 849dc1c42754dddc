package daytwo

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cacheops/cacheops/dayTwo/plan"
)

func TestAWaitIsLoggedWhenItBeginsOrChanges(t *testing.T) {
	g := NewWithT(t)
	var w waits
	a, b := types.NamespacedName{Namespace: "team-a", Name: "c"}, types.NamespacedName{Namespace: "team-b", Name: "c"}
	wait := func(pod, reason string) plan.Action {
		return plan.Action{Type: plan.ActionWait, Pod: pod, Reason: reason}
	}

	g.Expect(w.changed(a, wait("c-0", "waiting for the master to answer"))).To(BeTrue(), "a wait begins")
	g.Expect(w.changed(a, wait("c-0", "waiting for the master to answer"))).To(BeFalse(), "the same wait")
	g.Expect(w.changed(b, wait("c-0", "waiting for the master to answer"))).To(BeTrue(), "another cluster's wait")
	g.Expect(w.changed(a, wait("c-1", "c-1 is to be removed but serves 3 slot ranges and holds 120 keys"))).To(BeTrue(), "another pod, another reason")
	g.Expect(w.changed(a, wait("c-1", "c-1 is to be removed but serves 2 slot ranges and holds 7 keys"))).To(BeFalse(), "only the numbers changed")
	g.Expect(w.changed(a, wait("c-2", "c-2 is to be removed but serves 2 slot ranges and holds 7 keys"))).To(BeTrue(), "another pod")
	w.ended(a)
	g.Expect(w.changed(a, wait("c-2", "c-2 is to be removed but serves 2 slot ranges and holds 7 keys"))).To(BeTrue(), "the same wait after a step")

	g.Expect(withoutNumbers("slot 12 of 16384, 3 s")).To(Equal("slot # of #, # s"))
}
