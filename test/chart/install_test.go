package chart

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	daytwo "github.com/cacheops/cacheops/dayTwo"
	"github.com/cacheops/cacheops/examples"
	"github.com/cacheops/cacheops/renderer"
	"github.com/cacheops/cacheops/renderer/controller"
)

// TestChartInstallsAndReconciles installs the chart's ServiceAccount and
// RBAC into a real kube-apiserver, runs the day-one and day-two reconcilers
// as that ServiceAccount (the manager's client impersonates it), wired from
// the chart's own Deployment args as cmd/manager wires them, and reconciles
// examples/basic.yaml from creation to deletion. Every answer the API server
// gives the manager is watched: a single 403 fails the test.
func TestChartInstallsAndReconciles(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(logLevel())))
	admin := startControlPlane(t)

	t.Run("AllNamespaces", func(t *testing.T) {
		runInstall(t, admin, installCase{
			release: "cacheops", namespace: "cacheops-system",
			values:           "watchAllNamespaces: true",
			clusterNamespace: "apps", otherNamespace: "",
			checkMetrics: true,
		})
	})
	// The default values: the release namespace only.
	t.Run("ReleaseNamespace", func(t *testing.T) {
		runInstall(t, admin, installCase{
			release: "own", namespace: "own-system",
			clusterNamespace: "own-system", otherNamespace: "own-other",
		})
	})
	t.Run("WatchNamespaces", func(t *testing.T) {
		runInstall(t, admin, installCase{
			release: "scoped", namespace: "scoped-system",
			values:           "watchNamespaces: [team-a]",
			clusterNamespace: "team-a", otherNamespace: "team-b",
		})
	})
}

type installCase struct {
	release, namespace, values string
	// clusterNamespace is where examples/basic.yaml is created; it must be
	// watched.
	clusterNamespace string
	// otherNamespace, when set, must be out of the operator's reach.
	otherNamespace string
	checkMetrics   bool
}

// env is the control plane of this test binary.
type env struct {
	cfg    *rest.Config
	client client.Client
}

func startControlPlane(t *testing.T) env {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(repoRoot(), "bin")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			t.Fatalf("envtest needs %s in %s: run `make tools` first", b, assets)
		}
	}
	te := &envtest.Environment{
		// The CRDs exactly as Helm installs them: the chart's crds/ folder.
		CRDDirectoryPaths:     []string{filepath.Join(chartDir(), "crds")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := te.Start()
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return env{cfg: cfg, client: c}
}

func runInstall(t *testing.T, admin env, tc installCase) {
	ctx := context.Background()
	for i, ns := range []string{tc.namespace, tc.clusterNamespace, tc.otherNamespace} {
		// The cluster may live in the release namespace.
		if ns == "" || (i == 1 && ns == tc.namespace) {
			continue
		}
		if err := admin.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	// Install the chart: every rendered object, with server-side apply,
	// which refuses fields the API server does not know.
	r := renderChart(t, tc.release, tc.namespace, tc.values)
	for _, obj := range r.objs {
		err := admin.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.FieldOwner("helm"), client.ForceOwnership)
		if err != nil {
			t.Fatalf("installing %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	dep := deployment(t, r)
	user := fmt.Sprintf("system:serviceaccount:%s:%s", tc.namespace, dep.Spec.Template.Spec.ServiceAccountName)
	flags := parseArgs(t, managerContainer(t, dep).Args)

	// The manager, as cmd/manager/main.go builds it from these flags, but
	// talking to the API server as the chart's ServiceAccount.
	rec := &apiRecorder{}
	cfg := rest.CopyConfig(admin.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cfg.Wrap(rec.wrap)
	cacheOpts := controller.CacheOptions()
	if ns := flags.Lookup("watch-namespaces").Value.String(); ns != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, n := range strings.Split(ns, ",") {
			cacheOpts.DefaultNamespaces[strings.TrimSpace(n)] = cache.Config{}
		}
	}
	leaseID := leaderElectionID(t)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                flags.Lookup("leader-elect").Value.String() == "true",
		LeaderElectionID:              leaseID,
		LeaderElectionNamespace:       flags.Lookup("leader-election-namespace").Value.String(),
		LeaderElectionReleaseOnCancel: true,
		// Both subtests build a manager with the same controllers.
		Controller: config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&controller.Reconciler{}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&daytwo.Reconciler{Namespaces: cacheOpts.DefaultNamespaces}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	// Checked after the manager stopped (defers run last in, first out),
	// also when the test stops early: a refusal is the likeliest cause.
	defer func() {
		if got := rec.forbidden(); len(got) > 0 {
			t.Errorf("the API server refused %d distinct request(s) of the manager running as %s:\n  %s", len(got), user, strings.Join(got, "\n  "))
		} else if !t.Failed() {
			t.Logf("%d requests as %s, none refused", rec.total(), user)
		}
	}()
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		}
	}
	defer stop()

	// Leader election: the manager holds the Lease the chart lets it renew.
	lease := &coordinationv1.Lease{}
	eventually(t, 20*time.Second, "the manager to hold the leader election Lease", func() error {
		if err := admin.client.Get(ctx, client.ObjectKey{Namespace: tc.namespace, Name: leaseID}, lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder")
		}
		return nil
	})

	cc := loadExample(t, "basic", tc.clusterNamespace)
	if err := admin.client.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cc)

	// Day-one applied every object of examples/basic.yaml.
	children := []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "basic"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "basic"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "basic-headless"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "basic-read"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "basic-config"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "basic-auth"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "basic"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "basic"}},
	}
	eventually(t, 30*time.Second, "the CacheCluster's objects and status", func() error {
		for _, child := range children {
			if err := admin.client.Get(ctx, client.ObjectKey{Namespace: tc.clusterNamespace, Name: child.GetName()}, child); err != nil {
				return fmt.Errorf("%T %s: %w", child, child.GetName(), err)
			}
		}
		if err := admin.client.Get(ctx, key, cc); err != nil {
			return err
		}
		if cc.Status.ObservedGeneration != cc.Generation || cc.Status.Phase == "" {
			return fmt.Errorf("status not written yet: phase %q, observed generation %d of %d", cc.Status.Phase, cc.Status.ObservedGeneration, cc.Generation)
		}
		return nil
	})
	if !slices.Contains(cc.Finalizers, cachev1alpha1.Finalizer) {
		t.Errorf("finalizers: %v", cc.Finalizers)
	}
	if c := meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionStalled); c != nil {
		t.Errorf("the CacheCluster is Stalled: %s: %s", c.Reason, c.Message)
	}
	if c := meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionReconciling); c != nil && c.Reason == "RetryingAfterError" {
		t.Errorf("the last reconcile failed: %s", c.Message)
	}
	// No pods run in envtest: the cluster waits for them.
	if cc.Status.Phase != cachev1alpha1.PhaseInitializing {
		t.Errorf("phase: got %s, want Initializing", cc.Status.Phase)
	}
	secret := children[5].(*corev1.Secret)
	if len(secret.Data[renderer.DefaultSecretKey]) == 0 {
		t.Errorf("Secret basic-auth has no generated password: keys %v", keys(secret.Data))
	}
	eventually(t, 10*time.Second, "an Applied Event about the CacheCluster", func() error {
		events := &eventsv1.EventList{}
		if err := admin.client.List(ctx, events, client.InNamespace(tc.clusterNamespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "basic" && e.Reason == "Applied" {
				return nil
			}
		}
		return fmt.Errorf("%d events, none Applied", len(events.Items))
	})

	if tc.checkMetrics {
		checkExportedMetrics(t)
	}

	// What the ServiceAccount may and may not do, as the API server decides.
	allowed := []authorizationv1.ResourceAttributes{
		{Namespace: tc.clusterNamespace, Verb: "patch", Resource: "pods"},
		{Namespace: tc.clusterNamespace, Verb: "delete", Resource: "pods"},
		// The pre-check pod of an upgrade.
		{Namespace: tc.clusterNamespace, Verb: "create", Resource: "pods"},
		{Namespace: tc.clusterNamespace, Verb: "list", Resource: "persistentvolumeclaims"},
		{Namespace: tc.clusterNamespace, Verb: "delete", Resource: "persistentvolumeclaims"},
		{Namespace: tc.clusterNamespace, Verb: "update", Group: "cache.cacheops.io", Resource: "cacheclusters", Subresource: "finalizers"},
		{Namespace: tc.clusterNamespace, Verb: "create", Group: "events.k8s.io", Resource: "events"},
	}
	denied := []authorizationv1.ResourceAttributes{
		// The spec belongs to git: no update, create or delete of CacheClusters.
		{Namespace: tc.clusterNamespace, Verb: "update", Group: "cache.cacheops.io", Resource: "cacheclusters"},
		{Namespace: tc.clusterNamespace, Verb: "create", Group: "cache.cacheops.io", Resource: "cacheclusters"},
		{Namespace: tc.clusterNamespace, Verb: "delete", Group: "cache.cacheops.io", Resource: "cacheclusters"},
		{Namespace: tc.clusterNamespace, Verb: "create", Group: "apps", Resource: "deployments"},
		{Namespace: tc.clusterNamespace, Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "roles"},
		{Namespace: tc.namespace, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "someone-elses-lease"},
		{Verb: "get", Resource: "nodes"},
		{Verb: "create", Resource: "namespaces"},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
	}
	if tc.otherNamespace != "" {
		// Out of reach: nothing in a namespace that is not watched, and
		// nothing cluster-wide.
		for _, res := range []string{"cacheclusters", "secrets", "pods"} {
			group := ""
			if res == "cacheclusters" {
				group = "cache.cacheops.io"
			}
			denied = append(denied,
				authorizationv1.ResourceAttributes{Namespace: tc.otherNamespace, Verb: "list", Group: group, Resource: res},
				authorizationv1.ResourceAttributes{Verb: "list", Group: group, Resource: res})
		}
	}
	for _, ra := range allowed {
		if !canI(t, admin.client, user, ra) {
			t.Errorf("%s may not %s %s/%s in %q, which the operator needs", user, ra.Verb, ra.Resource, ra.Subresource, ra.Namespace)
		}
	}
	for _, ra := range denied {
		if canI(t, admin.client, user, ra) {
			t.Errorf("%s may %s %s %s in %q, which it should not", user, ra.Verb, ra.Resource, ra.Name, ra.Namespace)
		}
	}
	if tc.otherNamespace != "" {
		// The same as a request, not only as a review.
		sa, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		err = sa.List(ctx, &cachev1alpha1.CacheClusterList{}, client.InNamespace(tc.otherNamespace))
		if !apierrors.IsForbidden(err) {
			t.Errorf("listing CacheClusters in %s as %s: want Forbidden, got %v", tc.otherNamespace, user, err)
		}
		// A Secret there, created by its owner, stays out of reach.
		if err := admin.client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tc.otherNamespace, Name: "theirs"}}); err != nil {
			t.Fatal(err)
		}
		err = sa.Get(ctx, client.ObjectKey{Namespace: tc.otherNamespace, Name: "theirs"}, &corev1.Secret{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("reading Secret %s/theirs as %s: want Forbidden, got %v", tc.otherNamespace, user, err)
		}
		rec.forget(tc.otherNamespace)
		if err := sa.List(ctx, &cachev1alpha1.CacheClusterList{}, client.InNamespace(tc.clusterNamespace)); err != nil {
			t.Errorf("listing CacheClusters in %s as %s: %v", tc.clusterNamespace, user, err)
		}
	}

	// Deletion: the finalizer deletes the children, then lets go.
	if err := admin.client.Delete(ctx, cc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the CacheCluster and its objects to be deleted", func() error {
		if err := admin.client.Get(ctx, key, cc); !apierrors.IsNotFound(err) {
			return fmt.Errorf("CacheCluster still there (finalizers %v): %v", cc.Finalizers, err)
		}
		for _, child := range children {
			if err := admin.client.Get(ctx, client.ObjectKey{Namespace: tc.clusterNamespace, Name: child.GetName()}, child); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s still there: %v", child, child.GetName(), err)
			}
		}
		return nil
	})

}

// checkExportedMetrics checks the metrics the alerts and the dashboard rely
// on against the registry after real reconciles: names, labels and label
// values.
func checkExportedMetrics(t *testing.T) {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]map[string]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "cacheops_reconcile_total":
				if labels["outcome"] == "success" && labels["controller"] == controller.ControllerName {
					found[f.GetName()] = labels
				}
			case "cacheops_clusters":
				// Its value is not checked: the collector reads the cache of
				// the first manager of the process, gone when -count > 1.
				if labels["phase"] == string(cachev1alpha1.PhaseInitializing) {
					found[f.GetName()] = labels
				}
			}
		}
	}
	for _, want := range []string{"cacheops_reconcile_total", "cacheops_clusters"} {
		if found[want] == nil {
			t.Errorf("after a reconcile, %s has no series the alerts and dashboard expect", want)
		}
	}
}

func canI(t *testing.T, c client.Client, user string, ra authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		Groups:             []string{"system:serviceaccounts", "system:authenticated"},
		ResourceAttributes: &ra,
	}}
	if err := c.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// apiRecorder sees every response the API server gives the manager.
type apiRecorder struct {
	mu sync.Mutex
	// refused counts 403 answers by request.
	refused map[string]int
	n       int
}

func (a *apiRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.n++
		if err == nil && resp.StatusCode == http.StatusForbidden {
			if a.refused == nil {
				a.refused = map[string]int{}
			}
			a.refused[req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery]++
		}
		return resp, err
	})
}

// forget drops the refusals the test provoked on purpose in namespace ns.
func (a *apiRecorder) forget(ns string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for req := range a.refused {
		if strings.Contains(req, "/namespaces/"+ns+"/") {
			delete(a.refused, req)
		}
	}
}

// forbidden lists the refused requests, each with how often it was refused.
func (a *apiRecorder) forbidden() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for req, n := range a.refused {
		out = append(out, fmt.Sprintf("%dx %s", n, req))
	}
	slices.Sort(out)
	return out
}

func (a *apiRecorder) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// loadExample reads examples/NAME.yaml into namespace ns.
func loadExample(t *testing.T, name, ns string) *cachev1alpha1.CacheCluster {
	t.Helper()
	cc, err := examples.Load(name, ns)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// eventually polls check until it succeeds or the time is up.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func ptr[T any](v T) *T { return &v }

// logLevel keeps test output short; TEST_VERBOSE=1 shows the operator's logs.
func logLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}
