package daytwo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// password reads the cluster's Redis password: from the Secret day-one
// renders (cached), or from the team's own Secret that spec.auth.secretRef
// names (secrets.go: read again only when it changed).
func (r *Reconciler) password(ctx context.Context, cc *cachev1alpha1.CacheCluster) (string, error) {
	if ref := cc.Spec.Auth.SecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = renderer.DefaultSecretKey
		}
		return r.secretValue(ctx, client.ObjectKeyFromObject(cc), ref.Name, key)
	}
	name, key := renderer.AuthSecretName(cc), renderer.DefaultSecretKey
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", missingSecret(fmt.Sprintf("Secret %s does not exist", name))
		}
		return "", err
	}
	pw := string(s.Data[key])
	if pw == "" {
		return "", missingSecret(fmt.Sprintf("Secret %s has no key %s", name, key))
	}
	return pw, nil
}
