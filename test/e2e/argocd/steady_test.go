//go:build e2e

package argocd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/argocd"
)

// steady: once both clusters settled, refreshes (normal and hard) and two
// periodic resyncs of Argo CD find both Applications Synced and start no
// sync, and the operator writes nothing: counted twice, by the manager's
// own client metrics (rest_client_requests_total by method, from its pod's
// metrics port) and by the API server's (apiserver_request_total for
// CacheClusters, by verb and subresource). The manager's only writes are
// the leader-election Lease renewals (PUT, every 2 s). Argo CD's
// server-side diff sends dry-run applies, which store nothing; they are
// counted apart.
func (w *workflow) steady(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	apps := map[string]argocd.AppStatus{}
	rvs := map[string]string{}
	clusters := map[string]client.ObjectKey{appA: basicKey, appB: previewKey}
	for app, key := range clusters {
		cc := waitRunning(g, key)
		g.Expect(cc.Status.Operation).To(BeNil())
		rvs[app] = cc.ResourceVersion
		st, err := argocd.GetStatus(ctx, k8s, app)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Sync).To(Equal("Synced"))
		g.Expect(st.Health).To(Equal("Healthy"))
		apps[app] = st
	}
	mgr := managerPod(g)
	m0, a0 := managerRequests(g, mgr.Status.PodIP), apiserverCacheClusterRequests(g)
	start := time.Now()

	const refreshes = 5
	for i := range refreshes {
		for app, before := range apps {
			g.Expect(argocd.Refresh(ctx, k8s, app, i%2 == 0)).To(Succeed())
			g.Eventually(func(g Gomega) {
				st, err := argocd.GetStatus(ctx, k8s, app)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st.Refreshing).To(BeFalse())
			}, limits.Synced, limits.Poll).Should(Succeed())
			expectNoSync(g, app, before, fmt.Sprintf("refresh %d", i+1))
		}
	}
	t.Logf("measured: %d refreshes of %d Applications in %s", refreshes, len(apps), argocd.Since(start))
	// The periodic resyncs (every argocd.AppResyncSeconds) fall in the
	// window too.
	time.Sleep(time.Until(start.Add(limits.SteadyWindow)))
	for app, before := range apps {
		expectNoSync(g, app, before, "after the resyncs")
	}
	m1, a1 := managerRequests(g, mgr.Status.PodIP), apiserverCacheClusterRequests(g)
	window := time.Since(start)

	for app, rv := range rvs {
		cc := &cachev1alpha1.CacheCluster{}
		g.Expect(k8s.Get(ctx, clusters[app], cc)).To(Succeed())
		g.Expect(cc.ResourceVersion).To(Equal(rv), "CacheCluster %s was written", clusters[app])
	}
	managerWrites := map[string]float64{}
	for method, n := range delta(m0, m1) {
		if method != "GET" {
			managerWrites[method] = n
		}
	}
	apiWrites, dryRuns := map[string]float64{}, map[string]float64{}
	for verb, n := range delta(a0, a1) {
		switch v, _, _ := strings.Cut(verb, " "); {
		case v == "GET" || v == "LIST" || v == "WATCH":
		case strings.HasSuffix(verb, "(dry run)"):
			dryRuns[verb] = n
		default:
			apiWrites[verb] = n
		}
	}
	perMinute := func(n float64) string { return strconv.FormatFloat(n/window.Minutes(), 'f', 1, 64) }
	t.Logf("measured: steady window %s: the manager's requests by method %v (PUT per minute %s: the Lease); the API server's writes to CacheClusters by verb and subresource %v, Argo CD's server-side diff dry runs %v",
		window.Round(time.Second), delta(m0, m1), perMinute(managerWrites["PUT"]), apiWrites, dryRuns)
	g.Expect(apiWrites).To(BeEmpty(), "writes to CacheClusters (status included) in the steady state")
	delete(managerWrites, "PUT")
	g.Expect(managerWrites).To(BeEmpty(), "the manager created, patched or deleted something in the steady state")
	g.Expect(delta(m0, m1)["PUT"]).To(BeNumerically("<=", window.Seconds()/2+2), "more PUTs than Lease renewals (one per 2 s)")
	t.Logf("measured: the operator's status writes per minute in the steady state: %s", perMinute(apiWrites["PATCH status"]+apiWrites["UPDATE status"]+apiWrites["APPLY status"]))
}

// expectNoSync checks that app is Synced and Healthy and that no sync
// operation ran since before was read.
func expectNoSync(g Gomega, app string, before argocd.AppStatus, when string) {
	st, err := argocd.GetStatus(context.Background(), k8s, app)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Sync).To(Equal("Synced"), "%s: %s found a diff", app, when)
	g.Expect(st.Health).To(Equal("Healthy"), "%s: %s", app, when)
	// Self-heal (team-b) would have started a sync for any diff.
	g.Expect(st.StartedAt).To(Equal(before.StartedAt), "%s: %s started a sync", app, when)
	g.Expect(st.History).To(Equal(before.History))
}

// managerRequests reads the manager's rest_client_requests_total from its
// pod's metrics port, summed by method.
func managerRequests(g Gomega, podIP string) map[string]float64 {
	resp, err := http.Get("http://" + podIP + ":8080/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	out := map[string]float64{}
	for _, c := range counters(string(body), "rest_client_requests_total") {
		out[c.labels["method"]] += c.value
	}
	g.Expect(out).To(HaveKey("GET"), "the manager's metrics have no rest_client_requests_total")
	return out
}

// apiserverCacheClusterRequests reads the API server's
// apiserver_request_total for CacheClusters, summed by "VERB subresource".
func apiserverCacheClusterRequests(g Gomega) map[string]float64 {
	cs, err := kubernetes.NewForConfig(env.Config())
	g.Expect(err).NotTo(HaveOccurred())
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, c := range counters(string(body), "apiserver_request_total") {
		if c.labels["group"] != cachev1alpha1.GroupVersion.Group || c.labels["resource"] != "cacheclusters" {
			continue
		}
		k := strings.TrimSpace(c.labels["verb"] + " " + c.labels["subresource"])
		if c.labels["dry_run"] != "" {
			// Server-side diff: Argo CD's dry-run applies, which store nothing.
			k += " (dry run)"
		}
		out[k] += c.value
	}
	g.Expect(out).NotTo(BeEmpty(), "the API server's metrics count no CacheCluster request")
	return out
}

var labelRE = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// sample is one line of a Prometheus text exposition.
type sample struct {
	labels map[string]string
	value  float64
}

// counters parses the samples of counter name from a Prometheus text
// exposition.
func counters(text, name string) []sample {
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		fields := strings.Fields(line[end+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		s := sample{labels: map[string]string{}, value: v}
		for _, m := range labelRE.FindAllStringSubmatch(line[len(name)+1:end], -1) {
			s.labels[m[1]] = m[2]
		}
		out = append(out, s)
	}
	return out
}

// delta is after minus before, for the keys that moved.
func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
