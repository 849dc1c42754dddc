package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The ACL users the operator keeps for itself in a cluster with
// spec.users. Their names, and every name starting with "cacheops-", are
// refused in spec.users.
const (
	// OperatorUser is the user the operator's probes, day-two commands,
	// backup streams and pre-check seeds authenticate as; its password is
	// the cluster's password (spec.auth).
	OperatorUser = "cacheops-operator"
	// ReplicationUser is the user replicas authenticate as to their
	// master (masteruser); its password is the cluster's password.
	ReplicationUser = "cacheops-replication"
)

// UserSpec is one ACL user of the cluster's Redis. The operator sets its
// password from a Secret and its rules from here on every pod, live
// (ACL SETUSER), and keeps it across pod restarts. A user's passwords
// belong to the operator: the rules may not set, remove or switch them.
type UserSpec struct {
	// Name of the user, as clients send it in AUTH or HELLO. "default"
	// (which is off once users are set) and names starting with
	// "cacheops-" (the operator's own users) are reserved.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._@-]*$`
	// +kubebuilder:validation:XValidation:rule="self != 'default' && !self.startsWith('cacheops-')",messageExpression="'user name ' + self + ' is reserved: default is switched off once users are set and cacheops-* are the operator\\'s own users'"
	Name string `json:"name"`

	// PasswordSecret names the Secret key holding the user's password.
	// Changing the password in the Secret starts a rotation: the old
	// password stays valid for previousPasswordValidFor.
	PasswordSecret SecretKeyRef `json:"passwordSecret"`

	// Rules are the user's ACL rules (keys, channels, commands), e.g.
	// "~app:* +@read +@write -@dangerous". Rules that set or remove
	// passwords or switch the user on or off (>, <, #, !, nopass,
	// resetpass, on, off, reset) are refused: the operator owns them.
	// Empty: the user can run nothing.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[ -~]*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|[ (])([<>#!][^ )]*|(?i:nopass|resetpass|on|off|reset)([ )]|$))')",messageExpression="'rules ' + self.find('(^|[ (])([<>#!][^ )]*|(?i:nopass|resetpass|on|off|reset)([ )]|$))').trim() + ' sets a password or switches the user on or off; the operator owns these: put the password in passwordSecret and remove the rule'"
	Rules string `json:"rules,omitempty"`

	// PreviousPasswordValidFor is how long the old password stays valid
	// after the password in the Secret changes, so every client can
	// switch: both are accepted meanwhile, the old one is removed after.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('2160h')",message="previousPasswordValidFor must be between 0s and 2160h (90 days)"
	PreviousPasswordValidFor *metav1.Duration `json:"previousPasswordValidFor,omitempty"`
}

// UserStatus is a user as the operator last applied it on every pod.
// Only hash prefixes are shown, never a password.
type UserStatus struct {
	// Name of the user.
	Name string `json:"name"`
	// PasswordHash is the first 12 hex digits of the SHA-256 of the
	// password applied.
	// +optional
	PasswordHash string `json:"passwordHash,omitempty"`
	// PreviousPasswordHash is the same prefix of the password it replaced,
	// still accepted until PreviousValidUntil.
	// +optional
	PreviousPasswordHash string `json:"previousPasswordHash,omitempty"`
	// PreviousValidUntil is when the previous password stops being
	// accepted.
	// +optional
	PreviousValidUntil *metav1.Time `json:"previousValidUntil,omitempty"`
}
