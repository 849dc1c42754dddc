package probe

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/cacheops/cacheops/dayTwo/access"
)

// CLUSTER NODES as Redis 7.0 prints it during a bootstrap: a master with
// slots, a replica, a node being met, a failed master, a slot migrating.
func TestParseClusterView(t *testing.T) {
	g := NewWithT(t)
	info := "cluster_state:fail\r\ncluster_slots_assigned:10923\r\ncluster_known_nodes:4\r\n"
	nodes := "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 10.0.0.1:6379@16379 myself,master - 0 0 1 connected 0-5460 [5461->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]\n" +
		"67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 10.0.0.2:6379@16379 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238316232 1 connected\n" +
		"292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 10.0.0.3:6379@16379 master,fail? - 1426238316232 0 2 disconnected 5461-10922 16383\n" +
		"6ec23923021cf3ffec47632106199cb7f496ce01 :0@0 handshake,noaddr - 0 0 0 disconnected\n"
	v, err := ParseClusterView(info, nodes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.State).To(Equal("fail"))
	g.Expect(v.SlotsAssigned).To(Equal(10923))
	g.Expect(v.KnownNodes).To(Equal(4))
	g.Expect(v.Myself.ID).To(Equal("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca"))
	g.Expect(v.Myself.Master).To(BeTrue())
	g.Expect(v.Myself.Slots).To(Equal([]SlotRange{{0, 5460}}))
	g.Expect(v.Myself.Moving).To(Equal(1))
	g.Expect(v.Myself.Migrating).To(Equal(map[int]string{5461: "292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f"}))
	g.Expect(v.Myself.Importing).To(BeNil())
	g.Expect(v.Nodes).To(HaveLen(4))
	byID := map[string]ClusterNode{}
	for _, n := range v.Nodes {
		byID[n.ID] = n
	}
	g.Expect(byID["67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1"]).To(Equal(ClusterNode{ID: "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1", IP: "10.0.0.2", MasterID: "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca"}))
	failed := byID["292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f"]
	g.Expect(failed.Failed).To(BeTrue())
	g.Expect(failed.Slots).To(Equal([]SlotRange{{5461, 10922}, {16383, 16383}}))
	meeting := byID["6ec23923021cf3ffec47632106199cb7f496ce01"]
	g.Expect(meeting.Handshake).To(BeTrue())
	g.Expect(meeting.IP).To(BeEmpty())

	// The side that takes a slot marks it importing.
	v, err = ParseClusterView(info, "292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 10.0.0.3:6379@16379 myself,master - 0 0 2 connected 5462-10922 [5461-<-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca] [77->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Myself.Importing).To(Equal(map[int]string{5461: "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca"}))
	g.Expect(v.Myself.Migrating).To(Equal(map[int]string{77: "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1"}))
	g.Expect(v.Myself.Slots).To(Equal([]SlotRange{{5462, 10922}}))

	_, err = ParseClusterView(info, "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 10.0.0.2:6379@16379 slave - 0 0 1 connected\n")
	g.Expect(err).To(MatchError(ContainSubstring("no line flagged myself")))
	_, err = ParseClusterView(info, "abc 10.0.0.2:6379@16379 myself,master - 0 0 1 connected x-y\n")
	g.Expect(err).To(HaveOccurred())
}

// A probe of a real cluster node reads its view and the cluster
// parameters the operator derives from spec, in one round trip.
func TestProbeClusterReadsTheClusterParameters(t *testing.T) {
	g := NewWithT(t)
	s := &server{ip: "127.0.200.9", password: "pw", dir: t.TempDir(),
		extra: []string{"--cluster-enabled", "yes", "--cluster-node-timeout", "1234", "--cluster-replica-no-failover", "yes"}}
	s.extra = append(s.extra, "--cluster-config-file", s.dir+"/nodes.conf")
	s.start(t)
	t.Cleanup(s.kill)
	c := newConn(s.ip, access.Config{Password: s.password})
	defer c.close()
	v, err := probeCluster(context.Background(), c, time.Second, time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Myself.Master).To(BeTrue())
	g.Expect(v.State).To(Equal("fail"))
	g.Expect(v.Parameters).To(Equal(map[string]string{"cluster-node-timeout": "1234", "cluster-replica-no-failover": "yes"}))
}
