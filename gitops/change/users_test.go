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
