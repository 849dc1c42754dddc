package daytwo

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
	"time"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

// The ACL rules of the operator's own users. docs/security.md lists them
// with the code that sends each command; a command missing here is
// refused with NOPERM to the operator, and the e2e tests that run every
// day-two operation with users would fail.
const (
	// operatorRules: probes (PING, INFO, ROLE, CONFIG GET, CLUSTER
	// NODES/INFO/COUNTKEYSINSLOT), roles and failover (REPLICAOF,
	// FAILOVER, CLIENT KILL, WAIT, SHUTDOWN), live configuration (CONFIG
	// SET), data checks (RANDOMKEY, EXISTS, SCAN, DBSIZE in MULTI/EXEC,
	// SELECT), backups and pre-check seeds (BGSAVE, SYNC with REPLCONF),
	// sharded mode (CLUSTER *, READONLY, MIGRATE, and RESTORE, RESTORE-ASKING
	// and ASKING, which MIGRATE runs as this user on the target) and the
	// users themselves (ACL SETUSER, DELUSER, USERS). Keys: all (data
	// checks, MIGRATE); channels: none.
	operatorRules = "resetchannels ~* -@all +auth +hello +ping +echo +select +info +role +dbsize +scan +randomkey +exists +multi +exec +discard +wait " +
		"+config|get +config|set +client|kill +client|list +client|setname +replicaof +slaveof +failover +shutdown +bgsave +sync +psync +replconf " +
		"+readonly +asking +cluster +migrate +restore +restore-asking +acl|setuser +acl|deluser +acl|users"
	// replicationRules: what a replica sends its master (masteruser):
	// AUTH, PING, REPLCONF, PSYNC (SYNC from older replicas). Keys and
	// channels: none.
	replicationRules = "resetchannels -@all +auth +ping +replconf +psync +sync"
	// defaultOffLine switches the default user off with no password and no
	// command: a client that does not name a user is refused.
	defaultOffLine = "user default off resetpass resetkeys resetchannels -@all"
)

// userState is one user's passwords as the operator applied them: the
// SHA-256 of the current one and, during a rotation, of the previous one
// and until when it is accepted. It is kept in Secret <name>-users so a
// restarted operator ends a rotation at the same moment.
type userState struct {
	Hash               string     `json:"hash"`
	Previous           string     `json:"previous,omitempty"`
	PreviousValidUntil *time.Time `json:"previousValidUntil,omitempty"`
}

// passwordHash is how Redis stores a password: SHA-256, in hex.
func passwordHash(pw string) string {
	sum := sha256.Sum256([]byte(pw))
	return hex.EncodeToString(sum[:])
}

// userChange is what nextUserStates saw happen to a user's password.
type userChange struct {
	User string
	// Rotated: the password changed; the previous one is accepted until
	// ValidUntil.
	Rotated    bool
	ValidUntil time.Time
	// Expired: the previous password's window ended.
	Expired bool
}

// nextUserStates is the users' password state after now, from the state
// applied before and the hashes of the passwords in the users' Secrets
// (a user whose Secret is missing is absent from hashes: it keeps the
// password it had, or is not created). A changed password keeps the
// previous one for the user's previousPasswordValidFor; a window that
// has ended drops it. Users no longer in spec are dropped.
func nextUserStates(prev map[string]userState, users []cachev1alpha1.UserSpec, hashes map[string]string, now time.Time) (map[string]userState, []userChange) {
	next := map[string]userState{}
	var changes []userChange
	for _, u := range users {
		old, had := prev[u.Name]
		h, ok := hashes[u.Name]
		switch {
		case !ok && !had:
			continue
		case !ok:
			h = old.Hash
		}
		st := userState{Hash: h}
		switch {
		case had && old.Hash != h:
			// A rotation; one that started before this one ends now: a
			// user keeps at most two passwords.
			until := now.Add(previousValidFor(u))
			st.Previous, st.PreviousValidUntil = old.Hash, &until
			changes = append(changes, userChange{User: u.Name, Rotated: true, ValidUntil: until})
		case had && old.Previous != "" && old.PreviousValidUntil != nil && now.Before(*old.PreviousValidUntil):
			st.Previous, st.PreviousValidUntil = old.Previous, old.PreviousValidUntil
		case had && old.Previous != "":
			changes = append(changes, userChange{User: u.Name, Expired: true})
		}
		next[u.Name] = st
	}
	return next, changes
}

// previousValidFor is a user's rotation window (24h when unset).
func previousValidFor(u cachev1alpha1.UserSpec) time.Duration {
	if u.PreviousPasswordValidFor == nil {
		return 24 * time.Hour
	}
	return max(u.PreviousPasswordValidFor.Duration, 0)
}

// nextRotationEnd is the soonest end of a rotation window after now; zero
// when none runs.
func nextRotationEnd(states map[string]userState, now time.Time) time.Time {
	var at time.Time
	for _, st := range states {
		if t := st.PreviousValidUntil; t != nil && t.After(now) && (at.IsZero() || t.Before(at)) {
			at = *t
		}
	}
	return at
}

// aclUser is one user's rules as ACL SETUSER takes them after its name:
// reset first, so the command sets the whole user at once (Redis applies
// an ACL SETUSER atomically) and nothing of an earlier version stays.
type aclUser struct {
	Name  string
	Rules []string
}

// setUserArgs is the user's ACL SETUSER command.
func (u aclUser) setUserArgs() []any {
	args := []any{"ACL", "SETUSER", u.Name}
	for _, r := range u.Rules {
		args = append(args, r)
	}
	return args
}

// line is the user's line in the ACL file.
func (u aclUser) line() string {
	return "user " + u.Name + " " + strings.Join(u.Rules, " ")
}

// desiredUsers are the users every pod of a cluster with spec.users has,
// in the order they are applied: the operator's own first (the
// connection that applies the others is authenticated as it), then the
// replicas', then spec.users with the passwords of states (a user
// without a state, its Secret missing, is left out).
func desiredUsers(users []cachev1alpha1.UserSpec, states map[string]userState, clusterPasswordHash string) []aclUser {
	out := []aclUser{
		{Name: cachev1alpha1.OperatorUser, Rules: append([]string{"reset", "on", "#" + clusterPasswordHash}, strings.Fields(operatorRules)...)},
		{Name: cachev1alpha1.ReplicationUser, Rules: append([]string{"reset", "on", "#" + clusterPasswordHash}, strings.Fields(replicationRules)...)},
	}
	sorted := append([]cachev1alpha1.UserSpec(nil), users...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, u := range sorted {
		st, ok := states[u.Name]
		if !ok {
			continue
		}
		rules := []string{"reset", "on", "#" + st.Hash}
		if st.Previous != "" {
			rules = append(rules, "#"+st.Previous)
		}
		out = append(out, aclUser{Name: u.Name, Rules: append(rules, strings.Fields(u.Rules)...)})
	}
	return out
}

// aclFile is the ACL file the pods load at start: the default user off,
// then the desired users. It holds password hashes only.
func aclFile(desired []aclUser) string {
	var b strings.Builder
	b.WriteString(defaultOffLine + "\n")
	for _, u := range desired {
		b.WriteString(u.line() + "\n")
	}
	return b.String()
}

// hashPrefix is the part of a password hash status shows.
func hashPrefix(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
