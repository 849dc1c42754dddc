package renderer

import cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"

// A cluster with spec.users runs with an ACL file the day-two controller
// keeps in Secret <name>-users (only password hashes, never a password):
// the pods mount it and load it at start, so the users survive a
// restart; day-two applies every change live with ACL SETUSER as well.
const (
	// UsersMountPath is where the pods mount the ACL file's Secret.
	UsersMountPath = "/etc/redis-users"
	// UsersFileKey is the key of the ACL file in the Secret (and its
	// file name in UsersMountPath).
	UsersFileKey = "users.acl"
	// UsersStateKey is the key of the rotation state in the Secret: every
	// user's current and previous password hash and until when the
	// previous one is accepted. The pods do not mount it.
	UsersStateKey = "state.json"
)

// UsersEnabled says whether the cluster has spec.users: its default user
// is off, and the operator and the replicas use users of their own.
func UsersEnabled(cc *cachev1alpha1.CacheCluster) bool {
	return len(cc.Spec.Users) > 0
}

// UsersSecretName is the Secret day-two writes the ACL file into.
func UsersSecretName(cc *cachev1alpha1.CacheCluster) string {
	return cc.Name + "-users"
}

func usersValues(cc *cachev1alpha1.CacheCluster) map[string]any {
	if !UsersEnabled(cc) {
		return map[string]any{"enabled": false}
	}
	return map[string]any{
		"enabled":         true,
		"secretName":      UsersSecretName(cc),
		"mountPath":       UsersMountPath,
		"fileKey":         UsersFileKey,
		"operatorUser":    cachev1alpha1.OperatorUser,
		"replicationUser": cachev1alpha1.ReplicationUser,
	}
}
