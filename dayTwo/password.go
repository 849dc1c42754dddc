package daytwo

import (
	"context"
	"fmt"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type cachedPassword struct {
	password string
	read     time.Time
}

// userSecretTTL bounds how long a rotated password in a user's Secret goes
// unnoticed.
const userSecretTTL = 30 * time.Second

// password reads the cluster's Redis password.
func (r *Reconciler) password(ctx context.Context, cc *cachev1alpha1.CacheCluster) (string, error) {
	name, key := renderer.AuthSecretName(cc), renderer.DefaultSecretKey
	var rd client.Reader = r.Client
	ref := cc.Spec.Auth.SecretRef
	cacheKey := types.NamespacedName{Namespace: cc.Namespace, Name: cc.Name}
	if ref != nil {
		name = ref.Name
		if ref.Key != "" {
			key = ref.Key
		}
		r.mu.Lock()
		c, ok := r.userSecrets[cacheKey]
		r.mu.Unlock()
		if ok && r.now().Sub(c.read) < userSecretTTL {
			return c.password, nil
		}
		// The user's Secret is not in our label-filtered cache.
		rd = r.APIReader
	}
	s := &corev1.Secret{}
	if err := rd.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: name}, s); err != nil {
		return "", err
	}
	pw := string(s.Data[key])
	if pw == "" {
		return "", fmt.Errorf("secret %s has no key %s", name, key)
	}
	if ref != nil {
		r.mu.Lock()
		if r.userSecrets == nil {
			r.userSecrets = map[types.NamespacedName]cachedPassword{}
		}
		r.userSecrets[cacheKey] = cachedPassword{password: pw, read: r.now()}
		r.mu.Unlock()
	}
	return pw, nil
}
