package argocd

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplicationGVK is Argo CD's Application kind.
var ApplicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// AppSpec is what the tests vary in an Application.
type AppSpec struct {
	Name, RepoURL, Path, DestinationNamespace string
	// Project is the AppProject; empty is default.
	Project string
	// Wave is the sync wave, for a parent Application that syncs this one.
	Wave string
	// NoSelfHeal syncs new commits automatically but leaves changes made
	// to the live objects alone until the next commit.
	NoSelfHeal bool
}

// Application returns an Application as docs/gitops.md recommends: server-side
// apply and server-side diff, automated sync with prune and self-heal, from
// branch main of the repository. allowEmpty lets a prune remove the last
// CacheCluster of a folder.
func Application(s AppSpec) *unstructured.Unstructured {
	project := s.Project
	if project == "" {
		project = "default"
	}
	annotations := map[string]any{"argocd.argoproj.io/compare-options": "ServerSideDiff=true"}
	if s.Wave != "" {
		annotations["argocd.argoproj.io/sync-wave"] = s.Wave
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Application",
		"metadata": map[string]any{
			"name":        s.Name,
			"namespace":   Namespace,
			"annotations": annotations,
		},
		"spec": map[string]any{
			"project": project,
			"source": map[string]any{
				"repoURL":        s.RepoURL,
				"targetRevision": "main",
				"path":           s.Path,
			},
			"destination": map[string]any{
				"server":    "https://kubernetes.default.svc",
				"namespace": s.DestinationNamespace,
			},
			"syncPolicy": map[string]any{
				"automated":   map[string]any{"prune": true, "selfHeal": !s.NoSelfHeal, "allowEmpty": true},
				"syncOptions": []any{"ServerSideApply=true"},
			},
		},
	}}
}

// AppStatus is the part of an Application's status the tests read.
type AppStatus struct {
	Sync, Health, HealthMessage, Revision string
	// Operation is the last sync operation's phase (Running, Succeeded,
	// Failed, Error) and message; StartedAt tells one operation from the next.
	OperationPhase, OperationMessage, OperationRevision, StartedAt string
	// History is the number of syncs recorded.
	History int
	// Resources are the managed resources' health as Argo CD persisted it.
	Resources []Resource
	// Conditions are the Application's conditions as "Type: message".
	Conditions []string
	// Refreshing is true while a refresh asked for by annotation is pending.
	Refreshing bool
}

// Resource is one entry of .status.resources.
type Resource struct {
	Kind, Namespace, Name, Status, Health, HealthMessage string
}

// GetStatus reads the Application name.
func GetStatus(ctx context.Context, c client.Client, name string) (AppStatus, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ApplicationGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, u); err != nil {
		return AppStatus{}, err
	}
	s := AppStatus{}
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(u.Object, fields...)
		return v
	}
	s.Sync = str("status", "sync", "status")
	s.Revision = str("status", "sync", "revision")
	s.Health = str("status", "health", "status")
	s.HealthMessage = str("status", "health", "message")
	s.OperationPhase = str("status", "operationState", "phase")
	s.OperationMessage = str("status", "operationState", "message")
	s.OperationRevision = str("status", "operationState", "syncResult", "revision")
	s.StartedAt = str("status", "operationState", "startedAt")
	h, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
	s.History = len(h)
	_, s.Refreshing = u.GetAnnotations()["argocd.argoproj.io/refresh"]
	cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			s.Conditions = append(s.Conditions, fmt.Sprintf("%v: %v", m["type"], m["message"]))
		}
	}
	rs, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	for _, r := range rs {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		get := func(fields ...string) string {
			v, _, _ := unstructured.NestedString(m, fields...)
			return v
		}
		s.Resources = append(s.Resources, Resource{
			Kind: get("kind"), Namespace: get("namespace"), Name: get("name"), Status: get("status"),
			Health: get("health", "status"), HealthMessage: get("health", "message"),
		})
	}
	return s, nil
}

// Refresh asks Argo CD to re-read git and compare again, as a git webhook
// or `argocd app get --hard-refresh` would; hard skips the repo-server's
// manifest cache.
func Refresh(ctx context.Context, c client.Client, name string, hard bool) error {
	kind := "normal"
	if hard {
		kind = "hard"
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ApplicationGVK)
	u.SetNamespace(Namespace)
	u.SetName(name)
	patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"` + kind + `"}}}`)
	return c.Patch(ctx, u, client.RawPatch("application/merge-patch+json", patch))
}

// Since is a helper for logging measured durations.
func Since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }

// SetSelfHeal turns self-heal of Application name on or off.
func SetSelfHeal(ctx context.Context, c client.Client, name string, on bool) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ApplicationGVK)
	u.SetNamespace(Namespace)
	u.SetName(name)
	patch := []byte(fmt.Sprintf(`{"spec":{"syncPolicy":{"automated":{"selfHeal":%t}}}}`, on))
	return c.Patch(ctx, u, client.RawPatch("application/merge-patch+json", patch))
}
