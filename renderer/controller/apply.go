package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// ManagedKinds are the kinds the cachecluster chart can render. Pruning and
// deletion look at exactly these; a test fails when the chart renders a kind
// that is missing here.
var ManagedKinds = []schema.GroupVersionKind{
	networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"),
	policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"),
	corev1.SchemeGroupVersion.WithKind("Secret"),
	corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	corev1.SchemeGroupVersion.WithKind("Service"),
	appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
}

// ownedLabels select the children of one CacheCluster.
func ownedLabels(cc *cachev1alpha1.CacheCluster) client.MatchingLabels {
	return client.MatchingLabels{
		cachev1alpha1.LabelCluster:   cc.Name,
		cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue,
	}
}

// apply brings every rendered object to its desired state with server-side
// apply. Objects whose live state already matches are skipped, so a steady
// state sends no write to the API server. All changes are first sent as a
// server-side dry run: if the API server refuses any object, none is
// applied and the cluster is stalled with the server's message.
//
// The reads of objects the cache does not hold and the dry runs go to the
// API server all at once, not one after the other: a new cluster's first
// reconcile made 24 round trips in a row (a read, a dry run and an apply
// of each of its eight objects), and with hundreds of clusters created
// together on a busy API server that was what the day-one workers spent
// their time on (docs/scale.md). The applies stay in install order.
func (r *Reconciler) apply(ctx context.Context, s *scope) error {
	log := ctrl.LoggerFrom(ctx)
	for _, obj := range s.desired {
		if err := r.prepare(s.cc, obj); err != nil {
			return err
		}
	}
	// The cached objects are stripped (cache.go): they say who wrote an
	// object last and which rendering it holds, not its spec. Objects the
	// cache does not hold are read whole from the API server.
	lives := make([]client.Object, len(s.desired))
	whole := make([]bool, len(s.desired))
	var uncached []int
	for i, obj := range s.desired {
		live, err := r.getCached(ctx, obj.GroupVersionKind(), client.ObjectKeyFromObject(obj))
		if err != nil {
			return err
		}
		if live == nil {
			uncached = append(uncached, i)
		}
		lives[i] = live
	}
	// The cache holds only objects with our labels: make sure no one
	// else's object has the name of one it does not hold before creating
	// it. These reads happen only for objects the cache does not know, so
	// a steady state still sends nothing.
	if err := concurrently(uncached, func(i int) error {
		obj := s.desired[i]
		live, err := r.getLive(ctx, r.APIReader, obj.GroupVersionKind(), client.ObjectKeyFromObject(obj))
		if live != nil {
			lives[i], whole[i] = live, true
		}
		return err
	}); err != nil {
		return err
	}
	// What to apply, by index into s.desired: the applies keep install
	// order.
	stale := make([]bool, len(s.desired))
	var conflicts []string
	var verify []int
	for i, obj := range s.desired {
		if c := controlConflict(s.cc, obj.GetKind(), lives[i]); c != "" {
			conflicts = append(conflicts, c)
			continue
		}
		switch {
		case !holdsRendering(obj, lives[i]):
			stale[i] = true
		case whole[i]:
			stale[i] = !isSubset(obj.Object, lives[i].(*unstructured.Unstructured).Object, "")
		case r.known.needsReading(lives[i]):
			verify = append(verify, i)
		}
	}
	if len(conflicts) > 0 {
		return nameConflict(conflicts)
	}
	// An object that changed since day-one last knew it to hold the
	// rendering, or that someone else wrote: read it whole and compare
	// what day-one renders with what it holds (drift). Each version is
	// read once.
	if err := concurrently(verify, func(i int) error {
		obj := s.desired[i]
		live, err := r.getLive(ctx, r.APIReader, obj.GroupVersionKind(), client.ObjectKeyFromObject(obj))
		switch {
		case err != nil:
			return err
		case live == nil || !isSubset(obj.Object, live.Object, ""):
			log.Info("Object changed by someone else; applying it again", "kind", obj.GetKind(), "name", obj.GetName())
			stale[i] = true
		default:
			r.known.add(live)
		}
		return nil
	}); err != nil {
		return err
	}
	var pending []*unstructured.Unstructured
	for i, obj := range s.desired {
		if stale[i] {
			pending = append(pending, obj)
			if lives[i] != nil {
				// Its next version is day-one's own: judged afresh
				// from its managedFields when seen (needsReading).
				r.known.forget(lives[i].GetUID())
			}
		}
	}
	if len(pending) == 0 {
		return nil
	}

	all := make([]int, len(pending))
	for i := range all {
		all[i] = i
	}
	if err := concurrently(all, func(i int) error {
		obj := pending[i]
		err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
			client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			if isPermanent(err) {
				return &stall{reason: cachev1alpha1.ReasonApplyFailed, message: fmt.Sprintf("The API server refuses %s %s: %s", obj.GetKind(), obj.GetName(), apiMessage(err))}
			}
			return fmt.Errorf("dry run of %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, obj := range pending {
		err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
			client.FieldOwner(FieldManager), client.ForceOwnership)
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		s.applied = append(s.applied, obj.GetKind()+"/"+obj.GetName())
		log.V(1).Info("Applied object", "kind", obj.GetKind(), "name", obj.GetName())
	}
	r.Recorder.Eventf(s.cc, nil, corev1.EventTypeNormal, "Applied", "Apply", "Applied %d object(s): %s", len(s.applied), strings.Join(s.applied, ", "))
	log.Info("Applied objects", "objects", s.applied)
	return nil
}

// concurrently runs f for every index at once and returns the error of
// the first index (in the order given) that failed, so what a reconcile
// reports does not depend on which request answered first.
func concurrently(indexes []int, f func(i int) error) error {
	if len(indexes) == 1 {
		return f(indexes[0])
	}
	errs := make([]error, len(indexes))
	var wg sync.WaitGroup
	for n, i := range indexes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[n] = f(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// prepare makes a rendered object ready to apply: the controller owner
// reference and the hash of what is applied.
func (r *Reconciler) prepare(cc *cachev1alpha1.CacheCluster, obj *unstructured.Unstructured) error {
	obj.SetNamespace(cc.Namespace)
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion:         cachev1alpha1.GroupVersion.String(),
		Kind:               "CacheCluster",
		Name:               cc.Name,
		UID:                cc.UID,
		Controller:         ptrTo(true),
		BlockOwnerDeletion: ptrTo(true),
	}})
	annotations := obj.GetAnnotations()
	delete(annotations, cachev1alpha1.AnnotationAppliedHash)
	obj.SetAnnotations(annotations)
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("encoding %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	sum := sha256.Sum256(data)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[cachev1alpha1.AnnotationAppliedHash] = hex.EncodeToString(sum[:16])
	obj.SetAnnotations(annotations)
	return nil
}

// holdsRendering tells whether the live object was last applied from the
// same rendering as desired (the hash annotation prepare sets), which
// also catches fields day-one stopped rendering.
func holdsRendering(desired *unstructured.Unstructured, live client.Object) bool {
	return live != nil && live.GetAnnotations()[cachev1alpha1.AnnotationAppliedHash] == desired.GetAnnotations()[cachev1alpha1.AnnotationAppliedHash]
}

// ourManagers are the field managers of the operator's own writes to the
// objects day-one renders.
var ourManagers = map[string]bool{FieldManager: true, AuthFieldManager: true, TLSFieldManager: true}

// writtenByOthers tells whether anyone but the operator wrote the object
// itself (not its status) at or after day-one's last apply, from its
// managedFields: a write that sets a field records its manager and the
// time, to the second (kubectl edit, patch, apply, a label someone adds,
// which is not drift: the caller then compares the whole object once). An
// object day-one never applied counts as written by others.
//
// A write that only removes fields leaves no entry of its own, so this
// alone does not see it: knownVersions does, from the resourceVersion.
func writtenByOthers(live client.Object) bool {
	var ours *metav1.Time
	for _, e := range live.GetManagedFields() {
		if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			ours = e.Time
		}
	}
	if ours == nil {
		return true
	}
	for _, e := range live.GetManagedFields() {
		if e.Subresource != "" || ourManagers[e.Manager] {
			continue
		}
		if e.Time == nil || !e.Time.Before(ours) {
			return true
		}
	}
	return false
}

// knownVersions remembers, for each child, the resourceVersion at which
// day-one last knew it to hold the rendering, so an unchanged object is
// never read from the API server and a changed one is read once per
// version. Any write changes the resourceVersion, one that removes a
// field included; so does a status update (a StatefulSet whose pods
// change is read again, once per version, while it changes).
//
// A child seen for the first time (after the operator started, or after
// day-one applied it and forgot its version) is judged by its
// managedFields alone: read whole only if someone else wrote it since
// day-one's apply. The one change that misses is a write that only
// removed fields, made while no operator was running: it is put back at
// the object's next change or the cluster's next rendering change, not at
// the operator's start (docs/scale.md).
type knownVersions struct {
	mu sync.Mutex
	rv map[types.UID]string
}

// needsReading tells whether live must be read whole to know whether it
// holds the rendering; a first sight that need not be read is recorded.
func (v *knownVersions) needsReading(live client.Object) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	rv, seen := v.rv[live.GetUID()]
	switch {
	case seen:
		return rv != live.GetResourceVersion()
	case writtenByOthers(live):
		return true
	}
	if v.rv == nil {
		v.rv = map[types.UID]string{}
	}
	v.rv[live.GetUID()] = live.GetResourceVersion()
	return false
}

func (v *knownVersions) add(o client.Object) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.rv == nil {
		v.rv = map[types.UID]string{}
	}
	v.rv[o.GetUID()] = o.GetResourceVersion()
}

// forget drops what was known of a child: day-one applies it, or it was
// deleted.
func (v *knownVersions) forget(uid types.UID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.rv, uid)
}

// getCached reads an object of a kind the manager caches as the cache
// holds it (stripped, cache.go), or nil when the cache does not hold it.
// Kinds the scheme does not know (cert-manager's Certificate) are not
// cached: nil.
func (r *Reconciler) getCached(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (client.Object, error) {
	typed, err := r.Client.Scheme().New(gvk)
	if err != nil {
		return nil, nil
	}
	obj := typed.(client.Object)
	if err := r.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return obj, nil
}

// getLive reads an object through reader (the cache, or the API server
// directly) as a typed object, so only the kinds we watch are cached, and
// returns it as unstructured, or nil when it does not exist.
func (r *Reconciler) getLive(ctx context.Context, reader client.Reader, gvk schema.GroupVersionKind, key client.ObjectKey) (*unstructured.Unstructured, error) {
	typed, err := r.Client.Scheme().New(gvk)
	if err != nil {
		if gvk != CertificateGVK {
			return nil, fmt.Errorf("kind %s is not known to the operator: %w", gvk, err)
		}
		// cert-manager's Certificate (spec.tls.issuerRef) is not in the
		// scheme nor cached: it is read from the API server, for the
		// clusters with an issuer only.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := r.APIReader.Get(ctx, key, u); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		return u, nil
	}
	obj := typed.(client.Object)
	if err := reader.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	// A typed read leaves the kind out; the comparison with the rendered
	// object includes it.
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// isSubset reports whether every field of want has the same value in got.
// Maps may have more keys in got (defaults, other field managers); lists
// must match element by element, except owner references, where other
// owners may be present.
func isSubset(want, got any, path string) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		for k, wv := range w {
			gv, found := g[k]
			if !found {
				if isEmpty(wv) {
					continue
				}
				return false
			}
			if !isSubset(wv, gv, path+"."+k) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		if path == ".metadata.ownerReferences" {
			for _, wv := range w {
				found := false
				for _, gv := range g {
					if isSubset(wv, gv, path) {
						found = true
						break
					}
				}
				if !found {
					return false
				}
			}
			return true
		}
		if len(w) != len(g) {
			return false
		}
		for i := range w {
			if !isSubset(w[i], g[i], path) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(normalizeNumber(want), normalizeNumber(got))
	}
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

func normalizeNumber(v any) any {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case float64:
		if n == float64(int64(n)) {
			return int64(n)
		}
	}
	return v
}

// prune deletes children of this cluster that the chart no longer renders,
// e.g. the generated password Secret after spec.auth.secretRef was set.
func (r *Reconciler) prune(ctx context.Context, s *scope) error {
	keep := map[string]bool{}
	for _, obj := range s.desired {
		keep[obj.GroupVersionKind().Kind+"/"+obj.GetName()] = true
	}
	children, err := r.listChildren(ctx, s.cc)
	if err != nil {
		return err
	}
	for _, child := range children {
		kind := child.GetObjectKind().GroupVersionKind().Kind
		if keep[kind+"/"+child.GetName()] {
			continue
		}
		if err := r.Client.Delete(ctx, child, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("pruning %s %s: %w", kind, child.GetName(), err)
		}
		r.known.forget(child.GetUID())
		s.pruned = append(s.pruned, kind+"/"+child.GetName())
	}
	if len(s.pruned) > 0 {
		r.Recorder.Eventf(s.cc, nil, corev1.EventTypeNormal, "Pruned", "Prune", "Deleted %d object(s) no longer rendered: %s", len(s.pruned), strings.Join(s.pruned, ", "))
		ctrl.LoggerFrom(ctx).Info("Pruned objects", "objects", s.pruned)
	}
	return nil
}

// listChildren lists the objects of ManagedKinds that this CacheCluster
// controls (label and controller owner reference both match).
func (r *Reconciler) listChildren(ctx context.Context, cc *cachev1alpha1.CacheCluster) ([]client.Object, error) {
	var out []client.Object
	for _, gvk := range ManagedKinds {
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		obj, err := r.Client.Scheme().New(listGVK)
		if err != nil {
			return nil, err
		}
		list := obj.(client.ObjectList)
		if err := r.Client.List(ctx, list, client.InNamespace(cc.Namespace), ownedLabels(cc)); err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		items, err := apiMetaExtract(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			if !metav1.IsControlledBy(item, cc) {
				continue
			}
			item.GetObjectKind().SetGroupVersionKind(gvk)
			out = append(out, item)
		}
	}
	if cc.Spec.TLS.IssuerRef == nil {
		return out, nil
	}
	// Only a cluster with an issuer has a cert-manager Certificate (the
	// issuer cannot change); the kind is not in the scheme, nor cached.
	certs := &unstructured.UnstructuredList{}
	certs.SetGroupVersionKind(CertificateGVK.GroupVersion().WithKind(CertificateGVK.Kind + "List"))
	if err := r.Client.List(ctx, certs, client.InNamespace(cc.Namespace), ownedLabels(cc)); err != nil {
		if meta.IsNoMatchError(err) {
			return out, nil
		}
		return nil, fmt.Errorf("listing Certificates: %w", err)
	}
	for i := range certs.Items {
		if metav1.IsControlledBy(&certs.Items[i], cc) {
			out = append(out, &certs.Items[i])
		}
	}
	return out, nil
}

func apiMetaExtract(list client.ObjectList) ([]client.Object, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(client.Object))
	}
	return out, nil
}

// isPermanent tells errors that repeat until the spec changes (the API
// server refuses the object) from those worth retrying.
func isPermanent(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

func apiMessage(err error) string {
	if status, ok := err.(apierrors.APIStatus); ok {
		return status.Status().Message
	}
	return err.Error()
}

func ptrTo[T any](v T) *T { return &v }
