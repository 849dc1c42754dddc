package daytwo

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
)

func TestNextUserStates(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	later := now.Add(20 * time.Second)
	earlier := now.Add(-time.Second)
	app := cachev1alpha1.UserSpec{Name: "app", PreviousPasswordValidFor: &metav1.Duration{Duration: 20 * time.Second}}
	reader := cachev1alpha1.UserSpec{Name: "reader"}
	tests := []struct {
		name        string
		prev        map[string]userState
		users       []cachev1alpha1.UserSpec
		hashes      map[string]string
		want        map[string]userState
		wantChanges []userChange
	}{
		{"new users", nil, []cachev1alpha1.UserSpec{app, reader}, map[string]string{"app": "a1", "reader": "r1"},
			map[string]userState{"app": {Hash: "a1"}, "reader": {Hash: "r1"}}, nil},
		{"unchanged", map[string]userState{"app": {Hash: "a1"}}, []cachev1alpha1.UserSpec{app}, map[string]string{"app": "a1"},
			map[string]userState{"app": {Hash: "a1"}}, nil},
		{"a new password keeps the old one for the window", map[string]userState{"app": {Hash: "a1"}}, []cachev1alpha1.UserSpec{app}, map[string]string{"app": "a2"},
			map[string]userState{"app": {Hash: "a2", Previous: "a1", PreviousValidUntil: &later}}, []userChange{{User: "app", Rotated: true, ValidUntil: later}}},
		{"the default window is a day", map[string]userState{"reader": {Hash: "r1"}}, []cachev1alpha1.UserSpec{reader}, map[string]string{"reader": "r2"},
			map[string]userState{"reader": {Hash: "r2", Previous: "r1", PreviousValidUntil: timeAt(now.Add(24 * time.Hour))}}, []userChange{{User: "reader", Rotated: true, ValidUntil: now.Add(24 * time.Hour)}}},
		{"within the window both stay", map[string]userState{"app": {Hash: "a2", Previous: "a1", PreviousValidUntil: &later}}, []cachev1alpha1.UserSpec{app}, map[string]string{"app": "a2"},
			map[string]userState{"app": {Hash: "a2", Previous: "a1", PreviousValidUntil: &later}}, nil},
		{"after the window the old one goes", map[string]userState{"app": {Hash: "a2", Previous: "a1", PreviousValidUntil: &earlier}}, []cachev1alpha1.UserSpec{app}, map[string]string{"app": "a2"},
			map[string]userState{"app": {Hash: "a2"}}, []userChange{{User: "app", Expired: true}}},
		{"at the window's end the old one goes", map[string]userState{"app": {Hash: "a2", Previous: "a1", PreviousValidUntil: &now}}, []cachev1alpha1.UserSpec{app}, map[string]string{"app": "a2"},
			map[string]userState{"app": {Hash: "a2"}}, []userChange{{User: "app", Expired: true}}},
		{"a second rotation in the window drops the first password", map[string]userState{"app": {Hash: "a2", Previous: "a1", PreviousValidUntil: &later}}, []cachev1alpha1.UserSpec{app}, map[string]string{"app": "a3"},
			map[string]userState{"app": {Hash: "a3", Previous: "a2", PreviousValidUntil: &later}}, []userChange{{User: "app", Rotated: true, ValidUntil: later}}},
		{"rotated back to the previous password: a rotation like any other", map[string]userState{"app": {Hash: "a2", Previous: "a1", PreviousValidUntil: &later}}, []cachev1alpha1.UserSpec{app}, map[string]string{"app": "a1"},
			map[string]userState{"app": {Hash: "a1", Previous: "a2", PreviousValidUntil: &later}}, []userChange{{User: "app", Rotated: true, ValidUntil: later}}},
		{"a missing Secret keeps the password the user had", map[string]userState{"app": {Hash: "a1"}}, []cachev1alpha1.UserSpec{app, reader}, map[string]string{},
			map[string]userState{"app": {Hash: "a1"}}, nil},
		{"a user removed from spec is dropped", map[string]userState{"app": {Hash: "a1"}, "reader": {Hash: "r1"}}, []cachev1alpha1.UserSpec{app}, map[string]string{"app": "a1"},
			map[string]userState{"app": {Hash: "a1"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, changes := nextUserStates(tt.prev, tt.users, tt.hashes, now)
			g.Expect(got).To(Equal(tt.want))
			g.Expect(changes).To(Equal(tt.wantChanges))
		})
	}
}

func timeAt(v time.Time) *time.Time { return &v }

func TestACLFileAndCommands(t *testing.T) {
	g := NewWithT(t)
	until := time.Date(2026, 12, 3, 10, 0, 20, 0, time.UTC)
	users := []cachev1alpha1.UserSpec{
		{Name: "writer", Rules: "~app:* +@read +@write -@dangerous"},
		{Name: "reader", Rules: "~*  +@read"},
		{Name: "pending", Rules: "+@all"},
	}
	states := map[string]userState{
		"writer": {Hash: "w2", Previous: "w1", PreviousValidUntil: &until},
		"reader": {Hash: "r1"},
	}
	desired := desiredUsers(users, states, "op")
	file := aclFile(desired)
	lines := strings.Split(strings.TrimSpace(file), "\n")
	g.Expect(lines).To(HaveLen(5), "default, the operator's two users, and the two users with a password (pending's Secret is missing)")
	g.Expect(lines[0]).To(Equal("user default off resetpass resetkeys resetchannels -@all"))
	g.Expect(lines[1]).To(HavePrefix("user cacheops-operator reset on #op resetchannels ~* -@all +auth "))
	g.Expect(lines[1]).To(ContainSubstring(" +replicaof "))
	g.Expect(lines[1]).To(ContainSubstring(" +acl|setuser "))
	g.Expect(lines[1]).NotTo(ContainSubstring("+@"), "the operator's user names each command")
	g.Expect(lines[2]).To(Equal("user cacheops-replication reset on #op resetchannels -@all +auth +ping +replconf +psync +sync"))
	g.Expect(lines[3]).To(Equal("user reader reset on #r1 ~* +@read"))
	g.Expect(lines[4]).To(Equal("user writer reset on #w2 #w1 ~app:* +@read +@write -@dangerous"))
	g.Expect(file).NotTo(ContainSubstring(">"), "only hashes, never a password")
	g.Expect(desired[3].setUserArgs()).To(Equal([]any{"ACL", "SETUSER", "writer", "reset", "on", "#w2", "#w1", "~app:*", "+@read", "+@write", "-@dangerous"}))

	// After the window: one password.
	next, _ := nextUserStates(states, users, map[string]string{"writer": "w2", "reader": "r1"}, until)
	g.Expect(desiredUsers(users, next, "op")[3].Rules[:4]).To(Equal([]string{"reset", "on", "#w2", "~app:*"}))
	g.Expect(nextRotationEnd(states, until.Add(-time.Second))).To(Equal(until))
	g.Expect(nextRotationEnd(next, until)).To(BeZero())
	g.Expect(passwordHash("password")).To(Equal("5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"))
}
