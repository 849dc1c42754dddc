package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

// AuthFieldManager owns the generated password inside the chart's Secret.
const AuthFieldManager = "cacheops-auth"

// ensureAuthSecret makes sure the password exists before any pod needs it.
// With spec.auth.secretRef it checks the user's Secret; otherwise it writes a
// random password into <name>-auth once and never changes it. The chart
// declares that Secret without data, so the password never appears in
// rendered output and rendering stays deterministic.
func (r *Reconciler) ensureAuthSecret(ctx context.Context, s *scope) error {
	cc := s.cc
	if ref := cc.Spec.Auth.SecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = renderer.DefaultSecretKey
		}
		// The user's Secret is not labelled for our cache; read it directly.
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: ref.Name}, secret)
		switch {
		case apierrors.IsNotFound(err):
			return &stall{reason: cachev1alpha1.ReasonAuthSecretMissing, message: fmt.Sprintf("Secret %s named in spec.auth.secretRef does not exist: create it with the password under key %q, or remove spec.auth.secretRef to have one generated", ref.Name, key)}
		case err != nil:
			return fmt.Errorf("reading Secret %s: %w", ref.Name, err)
		case len(secret.Data[key]) == 0:
			return &stall{reason: cachev1alpha1.ReasonAuthSecretMissing, message: fmt.Sprintf("Secret %s has no key %q: add the password under that key, or set spec.auth.secretRef.key", ref.Name, key)}
		}
		return nil
	}

	name := renderer.AuthSecretName(cc)
	key := client.ObjectKey{Namespace: cc.Namespace, Name: name}
	cached := &corev1.Secret{}
	if err := r.Client.Get(ctx, key, cached); err == nil && len(cached.Data[renderer.DefaultSecretKey]) > 0 {
		if c := controlConflict(cc, "Secret", cached); c != "" {
			return nameConflict([]string{c})
		}
		return nil
	}
	// Decide on a fresh read: generating a second password because the
	// cache lagged would lock out every pod started with the first.
	live := &corev1.Secret{}
	err := r.APIReader.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		password, err := newPassword()
		if err != nil {
			return err
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      name,
				Namespace: cc.Namespace,
				Labels: map[string]string{
					cachev1alpha1.LabelCluster:   cc.Name,
					cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue,
				},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{renderer.DefaultSecretKey: []byte(password)},
		}
		if err := ctrl.SetControllerReference(cc, secret, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, secret, client.FieldOwner(AuthFieldManager)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("Secret %s appeared while creating it; retrying", name)
			}
			return fmt.Errorf("creating Secret %s: %w", name, err)
		}
		r.Recorder.Eventf(cc, nil, corev1.EventTypeNormal, "PasswordGenerated", "GeneratePassword", "Generated a password in Secret %s", name)
		return nil
	case err != nil:
		return fmt.Errorf("reading Secret %s: %w", name, err)
	}
	// Never read or write a password in a Secret someone else controls.
	if c := controlConflict(cc, "Secret", live); c != "" {
		return nameConflict([]string{c})
	}
	if len(live.Data[renderer.DefaultSecretKey]) > 0 {
		return nil
	}
	// The Secret exists without a password (someone removed it): write a new
	// one, guarded by the resourceVersion we read.
	password, err := newPassword()
	if err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if live.Data == nil {
		live.Data = map[string][]byte{}
	}
	live.Data[renderer.DefaultSecretKey] = []byte(password)
	if err := r.Client.Patch(ctx, live, patch, client.FieldOwner(AuthFieldManager)); err != nil {
		return fmt.Errorf("writing password into Secret %s: %w", name, err)
	}
	r.Recorder.Eventf(cc, nil, corev1.EventTypeWarning, "PasswordGenerated", "GeneratePassword", "Secret %s had no password; generated a new one (pods started with an old one must restart)", name)
	return nil
}

// newPassword returns 32 random bytes, URL-safe base64 encoded: no characters
// that need quoting in redis.conf, a shell or a URL.
func newPassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
