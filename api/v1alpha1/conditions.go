package v1alpha1

// Condition types. Ready is the summary that people and tools read first.
// Reconciling and Stalled follow the kstatus convention: they are present only
// while True and removed otherwise, so a leftover condition never makes a
// healthy cluster look busy or broken.
const (
	// ConditionReady summarises the cluster: every rendered child is healthy
	// and the cluster serves traffic as the spec asks.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the operator is moving the cluster
	// towards its spec (children rolling out, pods not ready yet).
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the operator cannot make progress without
	// a change from a person; its message says what to change.
	ConditionStalled = "Stalled"
	// ConditionAvailable is True while at least one Redis pod is ready to
	// serve.
	ConditionAvailable = "Available"
	// ConditionDegraded is True when the cluster serves, but with fewer
	// healthy pods or children than the spec asks for.
	ConditionDegraded = "Degraded"
	// ConditionQueued is True while a spec change waits for the running
	// operation to finish; its message says what waits for what.
	ConditionQueued = "Queued"
	// ConditionRestored is set on a cluster created with spec.restore: True
	// once the master loaded the dump and its key count matches the
	// backup's metadata, False with the reason when it does not.
	ConditionRestored = "Restored"
	// ConditionLastBackupSucceeded says whether the last backup attempt
	// completed (True, BackupSucceeded) or failed (False, BackupFailed, with
	// the error); absent until the first attempt ends.
	ConditionLastBackupSucceeded = "LastBackupSucceeded"
	// ConditionDataLost is True when more than half of the pods came back
	// without their data and no pod holds any: the cluster is Failed until
	// it is restored (spec.backup.autoRestore) or the loss is accepted
	// (annotation cache.cacheops.io/accept-data-loss). False afterwards,
	// saying which.
	ConditionDataLost = "DataLost"
	// ConditionStepFailing is True while the same day-two step has failed
	// three or more times in a row (it is retried with backoff); its
	// message names the step and the last error. Removed once a step
	// succeeds.
	ConditionStepFailing = "StepFailing"
	// ConditionCertificateLoaded is set with spec.tls: True when every pod
	// serves the certificate of Secret <name>-tls (day-two reloads it
	// with CONFIG SET once the pod sees the renewed files), False while
	// some pod still serves an older one.
	ConditionCertificateLoaded = "CertificateLoaded"
	// ConditionUsersApplied is set with spec.users: True when every pod
	// has every user with its current password (and, during a rotation,
	// the previous one), False with a message naming what is missing (a
	// user's Secret, a pod that refused ACL SETUSER).
	ConditionUsersApplied = "UsersApplied"
)

// Condition reasons. Every condition carries one; they are CamelCase so tools
// can match on them.
const (
	// ReasonReconciled: the last reconcile applied the spec and every child is healthy.
	ReasonReconciled = "Reconciled"
	// ReasonProgressing: children were applied and are rolling out.
	ReasonProgressing = "Progressing"
	// ReasonRenderFailed: the spec cannot be turned into objects.
	ReasonRenderFailed = "RenderFailed"
	// ReasonApplyFailed: the API server refused an object the operator rendered.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonInvalidSpec: the API server accepted the spec but the operator can
	// never satisfy it as written.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonReconcileError: a reconcile step failed with an error that is
	// retried (the message has the API server's words).
	ReasonReconcileError = "ReconcileError"
	// ReasonStepError: a day-two step (a command to Redis, a pod label or
	// deletion) keeps failing; see the StepFailing condition's message.
	ReasonStepError = "StepError"
	// ReasonDecodeFailed: the stored object does not decode into the API's
	// Go types (written under an older CRD or by hand); nothing is done
	// with it until it is fixed or deleted.
	ReasonDecodeFailed = "DecodeFailed"
	// ReasonNameConflict: an object the cluster renders already exists and
	// is controlled by someone else; nothing of the cluster is applied.
	ReasonNameConflict = "NameConflict"
	// ReasonInvalidConfig: Redis refuses a value of spec.config; the pods
	// keep running what they ran.
	ReasonInvalidConfig = "InvalidConfig"
	// ReasonAuthSecretMissing: spec.auth.secretRef names a Secret or key that does not exist.
	ReasonAuthSecretMissing = "AuthSecretMissing"
	// ReasonChildFailed: a rendered child reports a failure.
	ReasonChildFailed = "ChildFailed"
	// ReasonPodsNotReady: fewer pods are ready than the spec asks for.
	ReasonPodsNotReady = "PodsNotReady"
	// ReasonPodsReady: every pod is ready.
	ReasonPodsReady = "PodsReady"
	// ReasonNoPodReady: no pod is ready to serve.
	ReasonNoPodReady = "NoPodReady"
	// ReasonMajorityDown: more than half of the pods have been down for long.
	ReasonMajorityDown = "MajorityDown"
	// ReasonPaused: spec.paused is set; the operator changes nothing.
	ReasonPaused = "Paused"
	// ReasonDeleting: the cluster is being deleted.
	ReasonDeleting = "Deleting"
	// ReasonUpgradePrecheckFailed: a temporary pod with the new template did
	// not start; no pod of the cluster was touched.
	ReasonUpgradePrecheckFailed = "UpgradePrecheckFailed"
	// ReasonUpgradeRolledBack: an upgraded pod did not become ready and in
	// sync in time; the upgraded pods were returned to the previous template.
	ReasonUpgradeRolledBack = "UpgradeRolledBack"
	// ReasonDowngradeRefused: spec asks for an engine version that cannot
	// read the RDB format the master writes; nothing was changed.
	ReasonDowngradeRefused = "DowngradeRefused"
	// ReasonWaitingForOperation: a change waits for the running operation.
	ReasonWaitingForOperation = "WaitingForOperation"
	// ReasonInvalidBackupSchedule: backup.schedule does not parse.
	ReasonInvalidBackupSchedule = "InvalidBackupSchedule"
	// ReasonRestoreSourceNotReady: spec.restore names a CacheBackup that
	// does not exist or has not completed.
	ReasonRestoreSourceNotReady = "RestoreSourceNotReady"
	// ReasonRestoreIncompatible: spec.restore names a dump of an RDB
	// version newer than the cluster's engine version reads, or a backup
	// of another layout (a sharded backup of another shard count, a
	// replication cluster's dump in a sharded cluster or the other way
	// round); no pod is made, or (a layout found only in the bucket's
	// manifest) the Restored condition is False with it and the cluster
	// is Stalled.
	ReasonRestoreIncompatible = "RestoreIncompatible"
	// ReasonRestoreVerified: the restored key count matches the metadata.
	ReasonRestoreVerified = "RestoreVerified"
	// ReasonRestoreMismatch: the restored key count does not match.
	ReasonRestoreMismatch = "RestoreKeyCountMismatch"
	// ReasonBackupSucceeded / ReasonBackupFailed: the last backup attempt's end.
	ReasonBackupSucceeded = "BackupSucceeded"
	ReasonBackupFailed    = "BackupFailed"
	// ReasonDataLost / ReasonDataRestored / ReasonDataLossAccepted: the
	// DataLost condition's states.
	ReasonDataLost         = "DataLost"
	ReasonDataRestored     = "DataRestored"
	ReasonDataLossAccepted = "DataLossAccepted"
	// ReasonRestoreFailed: a disaster recovery restored a dump whose key
	// count did not match its metadata.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonCertificateLoaded / ReasonCertificateNotLoaded: every pod
	// serves the current certificate, or some pod does not yet.
	ReasonCertificateLoaded = "CertificateLoaded"
	// ReasonUsersApplied: every pod has every user of spec.users.
	ReasonUsersApplied = "UsersApplied"
	// ReasonUserSecretMissing: a user's passwordSecret names a Secret or
	// key that does not exist; that user is not created (or keeps the
	// password it had).
	ReasonUserSecretMissing = "UserSecretMissing"
	// ReasonUsersNotApplied: a pod did not take the users yet.
	ReasonUsersNotApplied      = "UsersNotApplied"
	ReasonCertificateNotLoaded = "CertificateNotLoaded"
	// ReasonCertificateUnavailable: spec.tls names a cert-manager issuer
	// and the certificate cannot be had: cert-manager is not installed,
	// or its Certificate reports why it issues none.
	ReasonCertificateUnavailable = "CertificateUnavailable"
	// ReasonTLSSecretInvalid: Secret <name>-tls (cert-manager's) holds no
	// usable certificate and key.
	ReasonTLSSecretInvalid = "TLSSecretInvalid"
)

// Phase is the coarse state of a CacheCluster, one of a fixed set.
// +kubebuilder:validation:Enum=Pending;Initializing;Running;Scaling;Upgrading;BackupRunning;Degraded;Failed
type Phase string

// The phases of a CacheCluster. Conditions carry the detail; the phase is for
// `kubectl get` and dashboards.
const (
	// PhasePending: accepted, nothing created yet.
	PhasePending Phase = "Pending"
	// PhaseInitializing: children created, the cluster has not been ready yet.
	PhaseInitializing Phase = "Initializing"
	// PhaseRunning: every pod is ready and the cluster matches its spec.
	PhaseRunning Phase = "Running"
	// PhaseScaling: the number of pods is changing.
	PhaseScaling Phase = "Scaling"
	// PhaseUpgrading: pods are being replaced with a new version or template.
	PhaseUpgrading Phase = "Upgrading"
	// PhaseBackupRunning: a backup is being taken; the cluster serves as usual.
	PhaseBackupRunning Phase = "BackupRunning"
	// PhaseDegraded: the cluster was ready and has lost pods or children since.
	PhaseDegraded Phase = "Degraded"
	// PhaseFailed: the operator cannot make progress; see the Stalled condition.
	PhaseFailed Phase = "Failed"
)

// Event reasons of the day-two data check after a restart: a restarted
// replica holds the keys sampled on the master (EventDataChecked), or lacks
// some and the rollout stops (EventDataCheckFailed).
const (
	EventDataChecked     = "DataChecked"
	EventDataCheckFailed = "DataCheckFailed"
)

// Event reasons of the day-two controller.
const (
	EventMasterElected     = "MasterElected"
	EventFailoverStarted   = "FailoverStarted"
	EventFailoverCompleted = "FailoverCompleted"
	EventFenced            = "Fenced"
	// EventMasterSlow: the master missed its probes for longer than the
	// probe timeout but answered the look taken before a failover, or
	// its replicas still hear from it and it is looked at again, so it
	// was not failed over (yet).
	EventMasterSlow       = "MasterSlow"
	EventPodRecreated     = "PodRecreated"
	EventOperationStarted = "OperationStarted"
	EventOperationDone    = "OperationCompleted"
	EventPrecheckPassed   = "PrecheckPassed"
	EventPrecheckFailed   = "PrecheckFailed"
	EventPodRestarted     = "PodRestarted"
	EventSwitchover       = "Switchover"
	EventRolledBack       = "RolledBack"
	EventChangeRefused    = "ChangeRefused"
	EventConfigApplied    = "ConfigApplied"
	EventRecommendation   = "CapacityRecommendation"
	EventBackupStarted    = "BackupStarted"
	EventBackupCompleted  = "BackupCompleted"
	EventBackupFailed     = "BackupFailed"
	EventBackupAborted    = "BackupAborted"
	EventBackupPruned     = "BackupPruned"
	EventBackupSkipped    = "BackupSkipped"
	EventRestored         = "Restored"
	EventDataLost         = "DataLost"
	EventRestoreStarted   = "DisasterRecoveryStarted"
	EventRestoreCompleted = "DisasterRecoveryCompleted"
	EventDataLossAccepted = "DataLossAccepted"
	// EventMasterLacksData: the master restarted with less than a replica
	// holds and automatic failover is off; a person decides.
	EventMasterLacksData = "MasterLacksData"
	// EventCAIssued, EventCertificateIssued: the operator made a CA or a
	// server certificate (the first, or a renewal; the message says why).
	EventCAIssued          = "CAIssued"
	EventCertificateIssued = "CertificateIssued"
	// EventCertificateLoaded: every pod serves the certificate of the
	// Secret, after a reload.
	EventCertificateLoaded = "CertificateLoaded"
	// EventUsersApplied: the users of spec.users were applied on every
	// pod (added, changed or removed), with no restart.
	EventUsersApplied = "UsersApplied"
	// EventPasswordRotated: a user's password changed in its Secret; the
	// previous one is accepted until the time the Event names.
	EventPasswordRotated = "PasswordRotated"
	// EventPreviousPasswordExpired: a rotation's previous password was
	// removed from every pod.
	EventPreviousPasswordExpired = "PreviousPasswordExpired"
)

// Labels and annotations the operator puts on the objects it renders.
const (
	// LabelCluster names the CacheCluster an object belongs to. It is used
	// instead of app.kubernetes.io/instance, which Argo CD may use to track
	// its own resources.
	LabelCluster = "cache.cacheops.io/cluster"
	// LabelRole is the replication role of a pod (master or replica). It is
	// owned by the day-two controller; Services select on it.
	LabelRole = "cache.cacheops.io/role"
	// LabelManagedBy is the standard managed-by label.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy on every child.
	ManagedByValue = "cacheops"
	// AnnotationAppliedHash records the hash of the rendered object last
	// applied, so a steady state issues no write to the API server.
	AnnotationAppliedHash = "cache.cacheops.io/applied-hash"
	// AnnotationSwitchoverTo asks for a switchover to the named pod
	// (kubectl cache switchover). Day-two removes it when done or refused.
	AnnotationSwitchoverTo = "cache.cacheops.io/switchover-to"
	// SwitchoverToBest as AnnotationSwitchoverTo's value lets day-two pick
	// the in-sync replica with the most data.
	SwitchoverToBest = "*"
	// AnnotationAcceptDataLoss (any value) accepts a data loss the
	// cluster reports (condition DataLost) without restoring a backup: the
	// cluster serves what it holds and is no longer Failed. Day-two
	// removes the annotation.
	AnnotationAcceptDataLoss = "cache.cacheops.io/accept-data-loss"
	// AnnotationVersion is the engine version a pod template runs.
	AnnotationVersion = "cache.cacheops.io/version"
	// AnnotationEngine is the engine a pod template runs (redis, valkey).
	AnnotationEngine = "cache.cacheops.io/engine"
	// AnnotationRestartConfig is the hash of the parameters that only take
	// effect at a restart; a change rolls the pods.
	AnnotationRestartConfig = "cache.cacheops.io/restart-config"
	// LabelPrecheck marks the temporary pod of an upgrade pre-check.
	LabelPrecheck = "cache.cacheops.io/precheck"
	// AnnotationTemplateKey is the template key (renderer.TemplateKey) of
	// the values the pre-check pod was rendered from, so day-two can tell a
	// pre-check of the current target from an outdated one.
	AnnotationTemplateKey = "cache.cacheops.io/template-key"
	// Finalizer lets the operator remove children (and PVCs, unless retained)
	// before the CacheCluster disappears.
	Finalizer = "cache.cacheops.io/finalizer"
)

// Roles of a Redis pod, the values of LabelRole.
const (
	RoleMaster  = "master"
	RoleReplica = "replica"
)
