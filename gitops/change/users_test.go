package change

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const usersCluster = baseCluster + `  users:
    - name: writer
      passwordSecret: {name: app-writer}
      rules: "~app:* +@write"
    - name: reader
      passwordSecret: {name: app-reader}
      rules: "~app:* +@read"
`

// A change of spec.users is applied live: the plan says so, with no
// restart, and names the users added, changed and removed.
func TestPredictUsersChangesAreLive(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	base := writeFile(t, dir, "base.yaml", usersCluster)
	head := writeFile(t, dir, "head.yaml", strings.Replace(strings.Replace(usersCluster, `"~app:* +@read"`, `"~app:* +@read -@dangerous"`, 1),
		"    - name: writer\n      passwordSecret: {name: app-writer}\n      rules: \"~app:* +@write\"\n",
		"    - name: loader\n      passwordSecret: {name: app-loader}\n", 1))
	plans := predictFiles(g, base, head, "shop-0")
	g.Expect(plans).To(HaveLen(1))
	g.Expect(plans[0].Operations).To(HaveLen(1))
	op := plans[0].Operations[0]
	g.Expect(op.Type).To(Equal("ApplyUsers"))
	g.Expect(op.Description).To(Equal("users added loader; changed reader; removed writer: applied live on every pod (ACL SETUSER), no restart"))
	g.Expect(op.Restarts).To(BeEmpty())
	g.Expect(impact(op)).To(Equal("no pod restart"))
}

// The first users change the pod template (the ACL file, the replicas'
// and the probes' user): the plan lists the rolling restart that loads
// the ACL file, and the users' operation says the pods restart.
func TestPredictFirstUsersRestartEveryPod(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	base := writeFile(t, dir, "base.yaml", baseCluster)
	head := writeFile(t, dir, "head.yaml", usersCluster)
	plans := predictFiles(g, base, head, "shop-0")
	g.Expect(plans).To(HaveLen(1))
	var users *PlannedOperation
	restarts := 0
	for i, op := range plans[0].Operations {
		if op.Type == "ApplyUsers" {
			users = &plans[0].Operations[i]
		}
		restarts += len(op.Restarts)
	}
	g.Expect(users).NotTo(BeNil(), "%+v", plans[0].Operations)
	g.Expect(users.Description).To(HavePrefix("2 users applied live on every pod (ACL SETUSER); the default user is switched off on each pod once it has restarted with the ACL file"))
	g.Expect(users.Description).To(HaveSuffix("; the pod template changes too: every pod restarts in the rollout planned here"))
	g.Expect(restarts).To(BeNumerically(">=", 3), "every pod of the 3 restarts: %+v", plans[0].Operations)
}
