package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/test/manifests"
)

// allOptions turns on every optional object of the chart.
const allOptions = `
serviceMonitor: {enabled: true}
prometheusRule: {enabled: true}
grafanaDashboard: {enabled: true}
`

// renderChart is exactly what `helm template` prints for the same release,
// namespace and values, compared object by object and string by string (the
// install tests apply renderChart's objects as users apply helm's).
func TestRenderChartEqualsHelmTemplate(t *testing.T) {
	helm := os.Getenv("HELM_BIN")
	if helm == "" {
		helm = filepath.Join(repoRoot(), "bin", "helm")
	}
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("the helm CLI built by `make tools` is needed (HELM_BIN): %v", err)
	}
	for _, tc := range []struct{ name, values string }{
		{"default values", ""},
		{"every optional object", allOptions},
		{"listed namespaces", "watchNamespaces: [team-a, team-b]\nmanager: {extraArgs: [--zap-devel]}"},
		{"every namespace", "watchAllNamespaces: true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := renderChart(t, defaultRelease, defaultNamespace, tc.values)
			valuesFile := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(valuesFile, []byte(tc.values), 0o644); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd := exec.Command(helm, "template", defaultRelease, chartDir(), "--namespace", defaultNamespace, "-f", valuesFile)
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, stderr.String())
			}
			want, err := manifests.Decode(out)
			if err != nil {
				t.Fatal(err)
			}
			got, err := manifests.FromUnstructured(r.objs)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range manifests.Diff("helm template", want, "renderChart", got) {
				t.Error(d)
			}
		})
	}
}

func TestChartDefaults(t *testing.T) {
	r := renderChart(t, defaultRelease, defaultNamespace, "")
	// By default nothing is cluster-wide: the operator watches its own
	// namespace only.
	want := []string{"Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"}
	if got := r.kinds(); !slices.Equal(got, want) {
		t.Fatalf("kinds: got %v, want %v", got, want)
	}
	for _, o := range r.objs {
		if o.GetNamespace() != defaultNamespace {
			t.Errorf("%s %s is in namespace %q, want the release namespace", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		if o.GetLabels()[cachev1alpha1.LabelManagedBy] == cachev1alpha1.ManagedByValue {
			t.Errorf("%s %s is labelled managed-by=cacheops, which marks a CacheCluster's child", o.GetKind(), o.GetName())
		}
	}

	d := deployment(t, r)
	c := managerContainer(t, d)
	if want := "ghcr.io/cacheops/cacheops-manager:" + loadChart(t).Metadata.AppVersion; c.Image != want {
		t.Errorf("image: got %s, want %s", c.Image, want)
	}
	checkRestricted(t, d.Spec.Template.Spec)

	flags := parseArgs(t, c.Args)
	if got := flags.Lookup("leader-elect").Value.String(); got != "true" {
		t.Errorf("--leader-elect: got %s, want true by default", got)
	}
	if got := flags.Lookup("leader-election-namespace").Value.String(); got != defaultNamespace {
		t.Errorf("--leader-election-namespace: got %q, want the release namespace", got)
	}
	// The clusters' NetworkPolicies admit the pods these flags name: they
	// must be the manager's own.
	if got := flags.Lookup("operator-namespace").Value.String(); got != defaultNamespace {
		t.Errorf("--operator-namespace: got %q, want the release namespace", got)
	}
	sel, err := labels.Parse(flags.Lookup("operator-pod-labels").Value.String())
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("--operator-pod-labels %q (%v) does not select the manager's pods, labelled %v", flags.Lookup("operator-pod-labels").Value.String(), err, d.Spec.Template.Labels)
	}
	if got := flags.Lookup("watch-namespaces").Value.String(); got != defaultNamespace {
		t.Errorf("--watch-namespaces: got %q, want the release namespace by default", got)
	}

	// Probes and the metrics Service reach the ports the manager binds.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	wantAddr := map[string]string{"health": "health-probe-bind-address", "metrics": "metrics-bind-address"}
	for name, flagName := range wantAddr {
		if got, want := flags.Lookup(flagName).Value.String(), fmt.Sprintf(":%d", ports[name]); got != want {
			t.Errorf("--%s is %s, but container port %s is %d", flagName, got, name, ports[name])
		}
	}
	for _, probe := range []struct {
		name string
		p    *corev1.Probe
		path string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if probe.p == nil || probe.p.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP GET of %s", probe.name, probe.path)
			continue
		}
		if probe.p.HTTPGet.Path != probe.path || probe.p.HTTPGet.Port.String() != "health" {
			t.Errorf("%s probe: got %s on port %s, want %s on port health", probe.name, probe.p.HTTPGet.Path, probe.p.HTTPGet.Port.String(), probe.path)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources: want CPU and memory requests and a memory limit, got %v", c.Resources)
	}

	svc := typed[corev1.Service](t, r.get(t, "Service", defaultNamespace, "cacheops-metrics"))
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the metrics Service selects %v, the manager's pods are labelled %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("the metrics Service should target the container port named metrics, got %v", svc.Spec.Ports)
	}

	// RBAC binds the rules to the ServiceAccount the pods run as.
	sa := d.Spec.Template.Spec.ServiceAccountName
	r.get(t, "ServiceAccount", defaultNamespace, sa)
	rb := typed[rbacv1.RoleBinding](t, r.get(t, "RoleBinding", defaultNamespace, "cacheops-manager"))
	checkBinding(t, rb.RoleRef, rb.Subjects, "Role", "cacheops-manager", sa)
	le := typed[rbacv1.Role](t, r.get(t, "Role", defaultNamespace, "cacheops-leader-election"))
	leaseID := leaderElectionID(t)
	var canRenew bool
	for _, rule := range le.Rules {
		if slices.Contains(rule.Resources, "leases") && slices.Contains(rule.Verbs, "update") && slices.Contains(rule.ResourceNames, leaseID) {
			canRenew = true
		}
	}
	if !canRenew {
		t.Errorf("the leader election Role does not let the manager renew Lease %s (the LeaderElectionID of cmd/manager): %v", leaseID, le.Rules)
	}
	leb := typed[rbacv1.RoleBinding](t, r.get(t, "RoleBinding", defaultNamespace, "cacheops-leader-election"))
	checkBinding(t, leb.RoleRef, leb.Subjects, "Role", "cacheops-leader-election", sa)

	all := renderChart(t, defaultRelease, defaultNamespace, allOptions)
	t.Logf("rendered chart: %.1f KiB with default values, %.1f KiB with ServiceMonitor, PrometheusRule and dashboard (CRDs not counted: %.1f KiB)",
		float64(r.size)/1024, float64(all.size)/1024, float64(crdSize(t))/1024)
}

func crdSize(t *testing.T) int {
	n := 0
	for _, crd := range loadChart(t).CRDObjects() {
		n += len(crd.File.Data)
	}
	return n
}

// checkRestricted checks the pod against the "restricted" Pod Security
// Standard, the parts a chart decides.
func checkRestricted(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("the pod shares a host namespace")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath", v.Name)
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("container %s has no securityContext", c.Name)
			continue
		}
		nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
		if !nonRoot {
			t.Errorf("container %s: runAsNonRoot is not true", c.Name)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = psc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("container %s: seccompProfile is not RuntimeDefault", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("container %s is privileged", c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			t.Errorf("container %s: capabilities should drop ALL and add none, got %v", c.Name, sc.Capabilities)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
		}
	}
}

func checkBinding(t *testing.T, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, name, sa string) {
	t.Helper()
	if ref.Kind != kind || ref.Name != name {
		t.Errorf("binding refers to %s %s, want %s %s", ref.Kind, ref.Name, kind, name)
	}
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: defaultNamespace}}
	if !reflect.DeepEqual(subjects, want) {
		t.Errorf("binding subjects: got %v, want %v", subjects, want)
	}
}

func TestChartWatchNamespaces(t *testing.T) {
	cluster := renderChart(t, defaultRelease, defaultNamespace, "watchAllNamespaces: true")
	clusterRules := typed[rbacv1.ClusterRole](t, cluster.get(t, "ClusterRole", "", "cacheops-manager")).Rules
	crb := typed[rbacv1.ClusterRoleBinding](t, cluster.get(t, "ClusterRoleBinding", "", "cacheops-manager"))
	checkBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", "cacheops-manager", deployment(t, cluster).Spec.Template.Spec.ServiceAccountName)
	if got := parseArgs(t, managerContainer(t, deployment(t, cluster)).Args).Lookup("watch-namespaces").Value.String(); got != "" {
		t.Errorf("--watch-namespaces with watchAllNamespaces: got %q, want every namespace", got)
	}
	for _, kind := range []string{"Role", "RoleBinding"} {
		for _, o := range cluster.all(kind) {
			if o.GetName() == "cacheops-manager" {
				t.Errorf("watchAllNamespaces rendered a %s %s/%s besides the ClusterRole", kind, o.GetNamespace(), o.GetName())
			}
		}
	}

	// A namespace listed twice gets one Role.
	r := renderChart(t, defaultRelease, defaultNamespace, "watchNamespaces: [team-a, team-b, team-a]")
	if got := r.all("ClusterRole"); len(got) > 0 {
		t.Errorf("watching listed namespaces should need no ClusterRole, got %d", len(got))
	}
	if got := r.all("ClusterRoleBinding"); len(got) > 0 {
		t.Errorf("watching listed namespaces should need no ClusterRoleBinding, got %d", len(got))
	}
	d := deployment(t, r)
	sa := d.Spec.Template.Spec.ServiceAccountName
	roles := 0
	for _, o := range r.all("Role") {
		if o.GetName() == "cacheops-manager" {
			roles++
		}
	}
	if roles != 2 {
		t.Errorf("want a manager Role in team-a and team-b, got %d Roles: %v", roles, r.names())
	}
	for _, ns := range []string{"team-a", "team-b"} {
		role := typed[rbacv1.Role](t, r.get(t, "Role", ns, "cacheops-manager"))
		if !reflect.DeepEqual(role.Rules, clusterRules) {
			t.Errorf("Role in %s has other rules than the ClusterRole:\n got %v\nwant %v", ns, role.Rules, clusterRules)
		}
		rb := typed[rbacv1.RoleBinding](t, r.get(t, "RoleBinding", ns, "cacheops-manager"))
		checkBinding(t, rb.RoleRef, rb.Subjects, "Role", "cacheops-manager", sa)
	}
	r.get(t, "Role", defaultNamespace, "cacheops-leader-election")

	flags := parseArgs(t, managerContainer(t, d).Args)
	if got := flags.Lookup("watch-namespaces").Value.String(); got != "team-a,team-b" {
		t.Errorf("--watch-namespaces: got %q, want team-a,team-b", got)
	}
	checkRestricted(t, d.Spec.Template.Spec)
}

func TestChartValues(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name    string
		values  string
		wantErr string
		check   func(t *testing.T, r rendered)
	}{
		{
			name:   "image tag and extra args",
			values: "image: {repository: registry.example/cacheops, tag: dev}\nmanager: {extraArgs: [--zap-devel], recreateNotReadyAfter: 10m, majorityDownAfter: 3m, logLevel: debug}",
			check: func(t *testing.T, r rendered) {
				c := managerContainer(t, deployment(t, r))
				if c.Image != "registry.example/cacheops:dev" {
					t.Errorf("image: got %s", c.Image)
				}
				flags := parseArgs(t, c.Args)
				for name, want := range map[string]string{"recreate-not-ready-after": "10m0s", "majority-down-after": "3m0s", "zap-devel": "true", "zap-log-level": "debug"} {
					if got := flags.Lookup(name).Value.String(); got != want {
						t.Errorf("--%s: got %s, want %s", name, got, want)
					}
				}
			},
		},
		{
			name:   "worker counts",
			values: "manager: {dayOneWorkers: 3, dayTwoWorkers: 8}",
			check: func(t *testing.T, r rendered) {
				flags := parseArgs(t, managerContainer(t, deployment(t, r)).Args)
				for name, want := range map[string]string{"dayone-workers": "3", "daytwo-workers": "8"} {
					if got := flags.Lookup(name).Value.String(); got != want {
						t.Errorf("--%s: got %s, want %s", name, got, want)
					}
				}
			},
		},
		{
			name:   "leader election off",
			values: "leaderElection: {enabled: false}",
			check: func(t *testing.T, r rendered) {
				flags := parseArgs(t, managerContainer(t, deployment(t, r)).Args)
				if got := flags.Lookup("leader-elect").Value.String(); got != "false" {
					t.Errorf("--leader-elect: got %s", got)
				}
				for _, role := range r.all("Role") {
					if role.GetName() != "cacheops-manager" {
						t.Errorf("no Role but the manager's is needed without leader election, got %s", role.GetName())
					}
				}
			},
		},
		{
			name:    "two replicas need leader election",
			values:  "replicas: 2\nleaderElection: {enabled: false}",
			wantErr: "replicas above 1 need leaderElection.enabled",
		},
		{
			name:    "an existing ServiceAccount needs a name",
			values:  "serviceAccount: {create: false}",
			wantErr: "serviceAccount.name is required",
		},
		{
			name:   "an existing ServiceAccount",
			values: "serviceAccount: {create: false, name: ops}",
			check: func(t *testing.T, r rendered) {
				if got := r.all("ServiceAccount"); len(got) > 0 {
					t.Errorf("rendered a ServiceAccount although serviceAccount.create is false")
				}
				if sa := deployment(t, r).Spec.Template.Spec.ServiceAccountName; sa != "ops" {
					t.Errorf("serviceAccountName: got %s", sa)
				}
				rb := typed[rbacv1.RoleBinding](t, r.get(t, "RoleBinding", defaultNamespace, "cacheops-manager"))
				checkBinding(t, rb.RoleRef, rb.Subjects, "Role", "cacheops-manager", "ops")
			},
		},
		{
			name:    "listed namespaces and every namespace at once",
			values:  "watchNamespaces: [team-a]\nwatchAllNamespaces: true",
			wantErr: "watchNamespaces and watchAllNamespaces exclude each other",
		},
		{
			name:   "no metrics Service",
			values: "metrics: {service: {enabled: false}}",
			check: func(t *testing.T, r rendered) {
				if got := r.all("Service"); len(got) > 0 {
					t.Errorf("rendered a Service although metrics.service.enabled is false")
				}
			},
		},
		{
			name:    "a ServiceMonitor needs the Service",
			values:  "metrics: {service: {enabled: false}}\nserviceMonitor: {enabled: true}",
			wantErr: "serviceMonitor.enabled needs metrics.service.enabled",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tryRender(c, defaultRelease, defaultNamespace, tc.values)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

func TestChartMonitoring(t *testing.T) {
	r := renderChart(t, defaultRelease, defaultNamespace, allOptions)
	metrics := declaredMetrics(t)

	// The ServiceMonitor scrapes the metrics Service.
	svc := typed[corev1.Service](t, r.get(t, "Service", defaultNamespace, "cacheops-metrics"))
	sm := r.get(t, "ServiceMonitor", defaultNamespace, "cacheops")
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("ServiceMonitor apiVersion: %s", sm.GetAPIVersion())
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(svc.Labels)) {
		t.Errorf("the ServiceMonitor selects %v, the metrics Service is labelled %v", sel, svc.Labels)
	}
	nss, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	if !slices.Equal(nss, []string{defaultNamespace}) {
		t.Errorf("the ServiceMonitor looks in namespaces %v", nss)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != svc.Spec.Ports[0].Name {
		t.Errorf("the ServiceMonitor should scrape port %s of the Service, got %v", svc.Spec.Ports[0].Name, endpoints)
	}

	// Every alert queries metrics and labels the operator exports.
	pr := r.get(t, "PrometheusRule", defaultNamespace, "cacheops")
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	alerts := map[string]bool{}
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, rule := range rules {
			rule := rule.(map[string]any)
			name, _ := rule["alert"].(string)
			expr, _ := rule["expr"].(string)
			alerts[name] = true
			if sev, _, _ := unstructured.NestedString(rule, "labels", "severity"); sev != "warning" && sev != "critical" {
				t.Errorf("alert %s: severity %q", name, sev)
			}
			if s, _, _ := unstructured.NestedString(rule, "annotations", "summary"); s == "" {
				t.Errorf("alert %s has no summary", name)
			}
			if name == "CacheopsManagerDown" {
				continue // up{}, a Prometheus series
			}
			checkQuery(t, "alert "+name, expr, metrics)
		}
	}
	for _, want := range []string{"CacheopsReconcileErrors", "CacheClusterFailover", "CacheClusterFailoverFlapping", "CacheClustersDegraded", "CacheClustersFailed", "CacheClusterBackupsMissing", "CacheClusterSlotsNotServed", "CacheopsManagerDown"} {
		if !alerts[want] {
			t.Errorf("no alert %s; the chart has %v", want, alerts)
		}
	}

	// The dashboard loads in Grafana's sidecar and queries real metrics.
	cm := typed[corev1.ConfigMap](t, r.get(t, "ConfigMap", defaultNamespace, "cacheops-dashboard"))
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels: %v", cm.Labels)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["cacheops.json"]), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	queried, ids := map[string]bool{}, map[int]string{}
	for _, p := range dash.Panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share the id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			for _, m := range checkQuery(t, "panel "+p.Title, target.Expr, metrics) {
				queried[m] = true
			}
		}
	}
	for _, want := range []string{"cacheops_clusters", "cacheops_reconcile_total", "cacheops_daytwo_step_errors_total", "cacheops_failovers_total", "cacheops_backup_last_success_timestamp_seconds", "cacheops_redis_keys",
		"cacheops_shard_slots", "cacheops_shard_keys", "cacheops_shard_migrating_slots", "cacheops_shard_importing_slots", "cacheops_shard_cluster_state_ok"} {
		if !queried[want] {
			t.Errorf("no dashboard panel shows %s", want)
		}
	}
}

var (
	metricRef  = regexp.MustCompile(`\b(cacheops_[a-z_]+)\b(\{([^}]*)\})?`)
	matcherRef = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	groupingBy = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// checkQuery checks that a PromQL expression names only metrics the operator
// declares, matches only on their labels (and known values), and groups only
// by their labels. It returns the metric names it found.
func checkQuery(t *testing.T, where, expr string, metrics map[string]metricDecl) []string {
	t.Helper()
	known := map[string]bool{}
	var names []string
	refs := metricRef.FindAllStringSubmatch(expr, -1)
	if len(refs) == 0 {
		t.Errorf("%s: %q queries no cacheops metric", where, expr)
	}
	for _, ref := range refs {
		name := ref[1]
		decl, ok := metrics[name]
		extra := ""
		if !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if d, found := metrics[strings.TrimSuffix(name, suffix)]; found && d.histogram && strings.HasSuffix(name, suffix) {
					decl, ok = d, true
					if suffix == "_bucket" {
						extra = "le"
					}
				}
			}
		}
		if !ok {
			t.Errorf("%s: metric %s is not exported by the operator (renderer/controller, dayTwo, dayTwo/probe)", where, name)
			continue
		}
		names = append(names, decl.name)
		for _, l := range decl.labels {
			known[l] = true
		}
		if extra != "" {
			known[extra] = true
		}
		for _, m := range matcherRef.FindAllStringSubmatch(ref[3], -1) {
			label, value := m[1], m[3]
			if !slices.Contains(decl.labels, label) {
				t.Errorf("%s: %s has no label %q (it has %v)", where, decl.name, label, decl.labels)
			}
			if err := checkLabelValue(label, value); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
	}
	for _, g := range groupingBy.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !known[l] {
				t.Errorf("%s: groups by %q, a label none of its metrics has", where, l)
			}
		}
	}
	return names
}

// checkLabelValue knows the fixed label values: phases and outcomes.
func checkLabelValue(label, value string) error {
	switch label {
	case "phase":
		for _, p := range []cachev1alpha1.Phase{
			cachev1alpha1.PhasePending, cachev1alpha1.PhaseInitializing, cachev1alpha1.PhaseRunning,
			cachev1alpha1.PhaseScaling, cachev1alpha1.PhaseUpgrading, cachev1alpha1.PhaseBackupRunning,
			cachev1alpha1.PhaseDegraded, cachev1alpha1.PhaseFailed,
		} {
			if string(p) == value {
				return nil
			}
		}
		return fmt.Errorf("phase %q is not a CacheCluster phase", value)
	case "outcome":
		if value != "success" && value != "error" {
			return fmt.Errorf("outcome %q is neither success nor error", value)
		}
	}
	return nil
}
