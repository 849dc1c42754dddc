package daytwo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// The Secrets a team names in its spec (spec.auth.secretRef and each
// user's passwordSecret) are the team's own: they carry no cacheops label,
// so the label-filtered cache does not hold them, and reading them from
// the API server on every reconcile would cost a request per cluster and
// Secret every recheck. Day-two watches the metadata of the Secrets of the
// namespaces it serves instead, in a cache of its own that keeps of each
// Secret its name, namespace and resourceVersion (never its data, labels
// or annotations: kubectl's last-applied annotation would hold the data).
// A Secret that changed wakes the clusters that name it (a field index on
// the CacheClusters) and is read once from the API server; one that did
// not change is never read again.

// secretRefIndex indexes CacheClusters by the Secrets their spec names.
const secretRefIndex = "cacheops.spec.secretRefs"

// secretRefs lists the Secrets a CacheCluster's spec names, which are not
// rendered by day-one.
func secretRefs(o client.Object) []string {
	cc, ok := o.(*cachev1alpha1.CacheCluster)
	if !ok {
		return nil
	}
	var names []string
	if ref := cc.Spec.Auth.SecretRef; ref != nil && ref.Name != "" {
		names = append(names, ref.Name)
	}
	for _, u := range cc.Spec.Users {
		if u.PasswordSecret.Name != "" {
			names = append(names, u.PasswordSecret.Name)
		}
	}
	return names
}

// secretMetadataOnly keeps of a Secret's metadata what says whether it
// changed.
func secretMetadataOnly(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}, nil
}

// secretMeta is a metadata-only Secret of the watch.
func secretMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// newSecretVersions builds the metadata cache of the Secrets of
// namespaces (nil: every namespace), and adds it to the manager.
func newSecretVersions(mgr ctrl.Manager, namespaces map[string]cache.Config) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: namespaces,
		DefaultTransform:  secretMetadataOnly,
	})
	if err != nil {
		return nil, fmt.Errorf("the users' Secrets' metadata cache: %w", err)
	}
	return c, mgr.Add(c)
}

// clustersNaming maps a Secret to the CacheClusters whose spec names it.
func (r *Reconciler) clustersNaming(ctx context.Context, o client.Object) []reconcile.Request {
	list := &cachev1alpha1.CacheClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{secretRefIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Cannot list the clusters that name a Secret", "secret", client.ObjectKeyFromObject(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// secretValue is one key of a Secret the cluster's spec names. It is read
// from the API server when its resourceVersion differs from the one read
// last for this cluster, or is not known (no metadata cache: a narrow
// test); a Secret the synced metadata cache does not have does not exist.
func (r *Reconciler) secretValue(ctx context.Context, cluster types.NamespacedName, ref cachev1alpha1.SecretKeyRef) (string, error) {
	name, key := ref.Name, ref.Key
	if key == "" {
		key = renderer.DefaultSecretKey
	}
	rv := ""
	if r.secretVersions != nil {
		m := secretMeta()
		err := r.secretVersions.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, m)
		switch {
		case apierrors.IsNotFound(err):
			return "", missingSecret(fmt.Sprintf("Secret %s does not exist", name))
		case err == nil:
			rv = m.ResourceVersion
		default:
			ctrl.LoggerFrom(ctx).V(1).Info("The Secrets' metadata cache did not answer; reading the Secret", "secret", name, "error", err.Error())
		}
	}
	memo := name + "/" + key
	r.mu.Lock()
	c, ok := r.namedSecrets[cluster][memo]
	r.mu.Unlock()
	if ok && rv != "" && c.resourceVersion == rv {
		return c.value, nil
	}
	v, rv, err := readSecretKey(ctx, r.APIReader, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, key)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	if r.namedSecrets == nil {
		r.namedSecrets = map[types.NamespacedName]map[string]secretRead{}
	}
	if r.namedSecrets[cluster] == nil {
		r.namedSecrets[cluster] = map[string]secretRead{}
	}
	r.namedSecrets[cluster][memo] = secretRead{value: v, resourceVersion: rv}
	r.mu.Unlock()
	return v, nil
}

// readSecretKey reads one key of a Secret through reader, with its
// resourceVersion; a Secret or key that is not there is a missingSecret.
func readSecretKey(ctx context.Context, reader client.Reader, key client.ObjectKey, dataKey string) (value, resourceVersion string, err error) {
	s := &corev1.Secret{}
	if err := reader.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", missingSecret(fmt.Sprintf("Secret %s does not exist", key.Name))
		}
		return "", "", err
	}
	v := string(s.Data[dataKey])
	if v == "" {
		return "", "", missingSecret(fmt.Sprintf("Secret %s has no key %s", key.Name, dataKey))
	}
	return v, s.ResourceVersion, nil
}

// missingSecret: a Secret, or the key in it, is not there. Its creation
// or change is watched, so a reconcile need not look again soon.
type missingSecret string

func (e missingSecret) Error() string { return string(e) }

// secretRead is a value read from a Secret a spec names, at the
// Secret's resourceVersion.
type secretRead struct {
	value, resourceVersion string
}
