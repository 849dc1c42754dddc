package daytwo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/dayTwo/access"
	"github.com/cacheops/cacheops/renderer"
)

// appliedUsers is what day-two last applied on a pod: the digest of the
// users, on the Redis process with that run id. A pod that restarted (a
// new run id) read the ACL file at start and gets the users again, which
// costs a few commands and covers a file the kubelet had not updated yet.
type appliedUsers struct {
	runID  string
	digest string
}

// applyUsers keeps spec.users on every pod: it reads the users' Secrets,
// moves the rotation state on (a changed password keeps the previous one
// for its window, an ended window drops it), writes the ACL file the pods
// load at start into Secret <name>-users, and applies the users live with
// ACL SETUSER on every pod that does not have them yet, with no restart.
// It runs before the planner on every reconcile of a cluster with users,
// and is idempotent: a step that failed half way is finished by the next.
func (r *Reconciler) applyUsers(ctx context.Context, s *scope) error {
	cc := s.cc
	if !renderer.UsersEnabled(cc) {
		return r.dropUsers(ctx, s)
	}
	sec, prev, err := r.usersSecret(ctx, cc)
	if err != nil {
		return err
	}
	hashes := map[string]string{}
	var missing []string
	for _, u := range cc.Spec.Users {
		pw, err := r.secretValue(ctx, s.key, u.PasswordSecret)
		if err != nil {
			missing = append(missing, fmt.Sprintf("user %s: %v", u.Name, err))
			continue
		}
		hashes[u.Name] = passwordHash(pw)
	}
	now := r.now()
	states, changes := nextUserStates(prev, cc.Spec.Users, hashes, now)
	desired := desiredUsers(cc.Spec.Users, states, passwordHash(s.access.Password))
	file := aclFile(desired)
	if err := r.writeUsersSecret(ctx, cc, sec, file, states); err != nil {
		return fmt.Errorf("writing Secret %s: %w", renderer.UsersSecretName(cc), err)
	}
	for _, c := range changes {
		switch {
		case c.Rotated:
			s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventPasswordRotated, "RotatePassword",
				"User %s: the password changed in its Secret; the previous one is accepted until %s", c.User, c.ValidUntil.UTC().Format(time.RFC3339))
		case c.Expired:
			s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventPreviousPasswordExpired, "RotatePassword",
				"User %s: the previous password's window ended; only the new one is accepted", c.User)
		}
	}
	// Look again when a rotation window ends. A changed password needs
	// no look: the users' Secrets are watched (secrets.go).
	s.snap.UsersRecheckAt = nextRotationEnd(states, now)

	digest := usersDigest(file)
	var notApplied, defaultOn []string
	applied := 0
	for i := range s.pods {
		p := &s.pods[i]
		if p.Status.PodIP == "" || !p.DeletionTimestamp.IsZero() {
			continue
		}
		st, _ := s.snap.Pod(p.Name)
		runID, withFile := st.Obs.RunID, startedWithACLFile(p)
		if !withFile {
			defaultOn = append(defaultOn, p.Name)
		}
		if r.usersApplied(s.key, p.Name) == (appliedUsers{runID: runID, digest: digest}) && runID != "" {
			applied++
			continue
		}
		if st.Observed && !st.Obs.Reachable && withFile {
			// Down or cut off: it gets the users when it answers again
			// (and reads the file if it restarts); waiting for a dial to
			// time out here would only slow a failover.
			notApplied = append(notApplied, p.Name+": not reachable")
			continue
		}
		if err := applyUsersOn(ctx, p.Status.PodIP, s.access, desired, withFile); err != nil {
			ctrl.LoggerFrom(ctx).Info("Could not apply the users", "pod", p.Name, "error", err.Error())
			notApplied = append(notApplied, fmt.Sprintf("%s: %v", p.Name, err))
			continue
		}
		applied++
		r.recordUsersApplied(s.key, p.Name, appliedUsers{runID: runID, digest: digest})
		ctrl.LoggerFrom(ctx).V(1).Info("Applied the users", "pod", p.Name, "users", len(desired))
	}
	setUsersStatus(s, states, missing, notApplied, defaultOn, applied)
	return nil
}

// startedWithACLFile says whether the pod's server loaded the ACL file at
// start. One started before spec.users was set keeps its default user on
// (its readiness probe authenticates as default) until it restarts; it
// gets every user meanwhile.
func startedWithACLFile(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == "redis" && slices.Contains(c.Args, "--aclfile") {
			return true
		}
	}
	return false
}

// applyUsersOn sets the users on one pod: each with one ACL SETUSER, the
// default user off (when the pod loaded the ACL file), the users no longer
// wanted deleted, and masteruser, so a replica started before spec.users
// authenticates to its master as the replication user.
func applyUsersOn(ctx context.Context, ip string, acc access.Config, desired []aclUser, defaultOff bool) error {
	c, err := usersClient(ctx, ip, acc)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, u := range desired {
		if err := c.Do(ctx, u.setUserArgs()...).Err(); err != nil {
			return fmt.Errorf("ACL SETUSER %s: %w", u.Name, err)
		}
	}
	if defaultOff {
		if err := c.Do(ctx, "ACL", "SETUSER", "default", "off", "resetpass", "resetkeys", "resetchannels", "-@all").Err(); err != nil {
			return fmt.Errorf("ACL SETUSER default off: %w", err)
		}
	}
	names, err := c.Do(ctx, "ACL", "USERS").StringSlice()
	if err != nil {
		return fmt.Errorf("ACL USERS: %w", err)
	}
	for _, n := range names {
		if n == "default" || slices.ContainsFunc(desired, func(u aclUser) bool { return u.Name == n }) {
			continue
		}
		if err := c.Do(ctx, "ACL", "DELUSER", n).Err(); err != nil {
			return fmt.Errorf("ACL DELUSER %s: %w", n, err)
		}
	}
	if err := c.ConfigSet(ctx, "masteruser", cachev1alpha1.ReplicationUser).Err(); err != nil {
		return fmt.Errorf("CONFIG SET masteruser: %w", err)
	}
	return nil
}

// usersClient is a connection for changing a pod's users, authenticated
// as acc says or, when the pod refuses that, as the other of the
// operator's identities: a pod started before spec.users knows only the
// default user, and after spec.users is removed a pod may still have the
// default user off until its users are dropped.
func usersClient(ctx context.Context, ip string, acc access.Config) (*redis.Client, error) {
	c := redisClient(ip, acc)
	err := c.Ping(ctx).Err()
	if err == nil {
		return c, nil
	}
	_ = c.Close()
	if !isAuthError(err) {
		return nil, err
	}
	other := acc
	if other.Username == "" {
		other.Username = cachev1alpha1.OperatorUser
	} else {
		other.Username = ""
	}
	c = redisClient(ip, other)
	if err2 := c.Ping(ctx).Err(); err2 != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w (and as %q: %v)", err, other.Username, err2)
	}
	return c, nil
}

// isAuthError: the server refused the credentials.
func isAuthError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "invalid password")
}

// dropUsers undoes spec.users once it is removed: the default user on
// again with the cluster's password, the users deleted, masteruser unset,
// on every pod; then Secret <name>-users is deleted. Nothing to do for a
// cluster that never had users.
func (r *Reconciler) dropUsers(ctx context.Context, s *scope) error {
	cc := s.cc
	sec := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: renderer.UsersSecretName(cc)}, sec)
	if apierrors.IsNotFound(err) {
		if meta.FindStatusCondition(cc.Status.Conditions, cachev1alpha1.ConditionUsersApplied) != nil || cc.Status.Users != nil {
			s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
				meta.RemoveStatusCondition(&st.Conditions, cachev1alpha1.ConditionUsersApplied)
				st.Users = nil
			})
		}
		return nil
	}
	if err != nil {
		return err
	}
	for i := range s.pods {
		p := &s.pods[i]
		if p.Status.PodIP == "" || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if err := dropUsersOn(ctx, p.Status.PodIP, s.access); err != nil {
			return fmt.Errorf("dropping the users of %s: %w", p.Name, err)
		}
	}
	if err := r.Client.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
		return err
	}
	r.mu.Lock()
	delete(r.usersOnPods, s.key)
	r.mu.Unlock()
	s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventUsersApplied, "ApplyUsers", "spec.users removed: the default user is on again with the cluster's password on every pod")
	return nil
}

func dropUsersOn(ctx context.Context, ip string, acc access.Config) error {
	c, err := usersClient(ctx, ip, acc)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Do(ctx, "ACL", "SETUSER", "default", "reset", "on", "#"+passwordHash(acc.Password), "~*", "&*", "+@all").Err(); err != nil {
		return fmt.Errorf("ACL SETUSER default on: %w", err)
	}
	if err := c.ConfigSet(ctx, "masteruser", "").Err(); err != nil {
		return fmt.Errorf("CONFIG SET masteruser: %w", err)
	}
	names, err := c.Do(ctx, "ACL", "USERS").StringSlice()
	if err != nil {
		return fmt.Errorf("ACL USERS: %w", err)
	}
	for _, n := range names {
		if n != "default" {
			if err := c.Do(ctx, "ACL", "DELUSER", n).Err(); err != nil {
				return fmt.Errorf("ACL DELUSER %s: %w", n, err)
			}
		}
	}
	return nil
}

// usersSecret reads Secret <name>-users and the rotation state in it; a
// missing Secret is an empty state.
func (r *Reconciler) usersSecret(ctx context.Context, cc *cachev1alpha1.CacheCluster) (*corev1.Secret, map[string]userState, error) {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cc.Namespace, Name: renderer.UsersSecretName(cc)}
	err := r.Client.Get(ctx, key, sec)
	if apierrors.IsNotFound(err) {
		// Just created, maybe, and not in the cache yet: a second
		// create would fail.
		err = r.APIReader.Get(ctx, key, sec)
	}
	if apierrors.IsNotFound(err) {
		return nil, map[string]userState{}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	states := map[string]userState{}
	if data := sec.Data[renderer.UsersStateKey]; len(data) > 0 {
		if err := json.Unmarshal(data, &states); err != nil {
			// A state that does not decode: start again from the
			// Secrets' passwords (a rotation in progress ends now).
			ctrl.LoggerFrom(ctx).Info("The users' state does not decode; starting from the current passwords", "error", err.Error())
			states = map[string]userState{}
		}
	}
	return sec, states, nil
}

// writeUsersSecret stores the ACL file and the rotation state in Secret
// <name>-users when they changed. The Secret has the cluster's labels
// (day-two's cache and watch see it) and a non-controller owner
// reference: deleted with the cluster, never pruned by day-one, which
// prunes only what it controls.
func (r *Reconciler) writeUsersSecret(ctx context.Context, cc *cachev1alpha1.CacheCluster, sec *corev1.Secret, file string, states map[string]userState) error {
	state, err := json.Marshal(states)
	if err != nil {
		return err
	}
	data := map[string][]byte{renderer.UsersFileKey: []byte(file), renderer.UsersStateKey: state}
	if sec != nil {
		if string(sec.Data[renderer.UsersFileKey]) == file && string(sec.Data[renderer.UsersStateKey]) == string(state) {
			return nil
		}
		// A merge patch: the operator's role may patch Secrets, not
		// update them (docs/security.md, RBAC).
		orig := sec.DeepCopy()
		sec = sec.DeepCopy()
		sec.Data = data
		return r.Client.Patch(ctx, sec, client.MergeFrom(orig))
	}
	no := false
	sec = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: renderer.UsersSecretName(cc), Namespace: cc.Namespace,
			Labels: map[string]string{cachev1alpha1.LabelCluster: cc.Name, cachev1alpha1.LabelManagedBy: cachev1alpha1.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "CacheCluster", Name: cc.Name, UID: cc.UID,
				Controller: &no,
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	return r.Client.Create(ctx, sec)
}

func (r *Reconciler) usersApplied(key types.NamespacedName, pod string) appliedUsers {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.usersOnPods[key][pod]
}

func (r *Reconciler) recordUsersApplied(key types.NamespacedName, pod string, a appliedUsers) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.usersOnPods == nil {
		r.usersOnPods = map[types.NamespacedName]map[string]appliedUsers{}
	}
	if r.usersOnPods[key] == nil {
		r.usersOnPods[key] = map[string]appliedUsers{}
	}
	r.usersOnPods[key][pod] = a
}

func usersDigest(file string) string {
	sum := sha256.Sum256([]byte(file))
	return hex.EncodeToString(sum[:8])
}

// setUsersStatus keeps status.users and the UsersApplied condition: True
// once every pod has every user, False naming a missing Secret or a pod
// that did not take the users. An Event tells when the users applied
// everywhere changed. defaultOn are the pods started without the ACL file
// (before the first users): their default user stays on until the
// rolling restart onto the new pod template reaches them, and the
// condition's message says so.
func setUsersStatus(s *scope, states map[string]userState, missing, notApplied, defaultOn []string, applied int) {
	var users []cachev1alpha1.UserStatus
	for name, st := range states {
		u := cachev1alpha1.UserStatus{Name: name, PasswordHash: hashPrefix(st.Hash)}
		if st.Previous != "" && st.PreviousValidUntil != nil {
			t := metav1.NewTime(st.PreviousValidUntil.UTC().Truncate(time.Second))
			u.PreviousPasswordHash, u.PreviousValidUntil = hashPrefix(st.Previous), &t
		}
		users = append(users, u)
	}
	sort.Slice(users, func(i, j int) bool { return users[i].Name < users[j].Name })

	status, reason := metav1.ConditionTrue, cachev1alpha1.ReasonUsersApplied
	msg := fmt.Sprintf("%d users applied live on %d pods (ACL SETUSER), kept in Secret %s for restarts", len(states), applied, renderer.UsersSecretName(s.cc))
	restart := ", no restart"
	if len(defaultOn) > 0 {
		restart = fmt.Sprintf("; the default user stays on in %s until the rolling restart onto the pod template with the ACL file reaches it", strings.Join(defaultOn, ", "))
		msg += restart
	}
	switch {
	case len(missing) > 0:
		status, reason = metav1.ConditionFalse, cachev1alpha1.ReasonUserSecretMissing
		msg = "Missing password Secret: " + strings.Join(missing, "; ") + ". Create the Secret with the password under the key passwordSecret names; until then that user is not created (or keeps the password it had)."
	case len(notApplied) > 0:
		status, reason = metav1.ConditionFalse, cachev1alpha1.ReasonUsersNotApplied
		msg = "Users not applied on " + strings.Join(notApplied, "; ")
	}
	cur := meta.FindStatusCondition(s.cc.Status.Conditions, cachev1alpha1.ConditionUsersApplied)
	if cur == nil || cur.Status != status || cur.Reason != reason || cur.Message != msg {
		gen := s.cc.Generation
		s.status.set(func(st *cachev1alpha1.CacheClusterStatus) {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: cachev1alpha1.ConditionUsersApplied, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
		})
		if status == metav1.ConditionFalse && reason == cachev1alpha1.ReasonUserSecretMissing {
			s.eventf(corev1.EventTypeWarning, cachev1alpha1.ReasonUserSecretMissing, "ApplyUsers", "%s", msg)
		}
	}
	if !usersEqual(s.cc.Status.Users, users) {
		s.status.set(func(st *cachev1alpha1.CacheClusterStatus) { st.Users = users })
		if len(notApplied) == 0 {
			names := make([]string, 0, len(users))
			for _, u := range users {
				names = append(names, u.Name)
			}
			s.eventf(corev1.EventTypeNormal, cachev1alpha1.EventUsersApplied, "ApplyUsers", "Users %s applied live on every pod%s", strings.Join(names, ", "), restart)
		}
	}
}

func usersEqual(a, b []cachev1alpha1.UserStatus) bool {
	return slices.EqualFunc(a, b, func(x, y cachev1alpha1.UserStatus) bool {
		return x.Name == y.Name && x.PasswordHash == y.PasswordHash && x.PreviousPasswordHash == y.PreviousPasswordHash &&
			(x.PreviousValidUntil == nil) == (y.PreviousValidUntil == nil) &&
			(x.PreviousValidUntil == nil || x.PreviousValidUntil.Equal(y.PreviousValidUntil))
	})
}
