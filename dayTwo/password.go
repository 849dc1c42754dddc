package daytwo

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// password reads the cluster's Redis password: from the Secret day-one
// renders (cached), or from the team's own Secret that spec.auth.secretRef
// names (secrets.go: read again only when it changed).
func (r *Reconciler) password(ctx context.Context, cc *cachev1alpha1.CacheCluster) (string, error) {
	if ref := cc.Spec.Auth.SecretRef; ref != nil {
		return r.secretValue(ctx, client.ObjectKeyFromObject(cc), *ref)
	}
	// Day-one's own Secret, labelled: in the cache.
	pw, _, err := readSecretKey(ctx, r.Client, client.ObjectKey{Namespace: cc.Namespace, Name: renderer.AuthSecretName(cc)}, renderer.DefaultSecretKey)
	return pw, err
}
