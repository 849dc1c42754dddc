package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
)

// The security settings of a manifest a person might get wrong, and the
// message they get; and the same settings admitted when they are right.
func TestAdmissionOfSecuritySettings(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name    string
		spec    string
		wantErr string
	}{
		{"an allowed client with no selector", "version: '7.0.15'\nnetwork: {allowedClients: [{}]}", `an allowed client needs a podSelector, a namespaceSelector or both`},
		{"an empty list of allowed clients", "version: '7.0.15'\nnetwork: {allowedClients: []}", `spec.network.allowedClients in body should have at least 1 items`},
		{"an unknown spread", "version: '7.0.15'\nscheduling: {spread: strict}", `scheduling.spread strict is not a spread mode: preferred spreads the pods over nodes and zones when there is room, required never puts two pods on one node`},
		{"required spread", "version: '7.0.15'\nscheduling: {spread: required}", ``},
		{"a user named default", "version: '7.0.15'\nusers: [{name: default, passwordSecret: {name: s}}]", `user name default is reserved`},
		{"a user named like the operator's", "version: '7.0.15'\nusers: [{name: cacheops-operator, passwordSecret: {name: s}}]", `user name cacheops-operator is reserved`},
		{"a user name with a space", "version: '7.0.15'\nusers: [{name: 'a b', passwordSecret: {name: s}}]", `spec.users[0].name in body should match`},
		{"a password in the rules", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: '~app:* >secret +@read'}]", `rules >secret sets a password or switches the user on or off; the operator owns these`},
		{"a password removed in the rules", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: '<secret'}]", `rules <secret sets a password`},
		{"a hash in the rules", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: '+get #5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8'}]", `rules #5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 sets a password`},
		{"a hash removed in the rules", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: '!5e88'}]", `rules !5e88 sets a password`},
		{"nopass in the rules", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: '+@all NoPass'}]", `rules NoPass sets a password`},
		{"resetpass in the rules", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: 'resetpass'}]", `rules resetpass sets a password`},
		{"on in the rules", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: 'on +@read'}]", `rules on sets a password or switches the user on or off`},
		{"off in the rules", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: '+@read off'}]", `rules off sets a password`},
		{"reset in the rules", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: 'reset +@read'}]", `rules reset sets a password`},
		{"a password in a selector", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: '(>pw ~x +get)'}]", `rules (>pw sets a password`},
		{"two users of one name", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}}, {name: app, passwordSecret: {name: t}}]", `Duplicate value`},
		{"a negative rotation window", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, previousPasswordValidFor: -1h}]", `previousPasswordValidFor must be between 0s and 2160h`},
		{"users with rules and a rotation window", "version: '7.0.15'\nusers: [{name: app, passwordSecret: {name: s}, rules: '~app:* &app:* +@read +@write -@dangerous resetchannels', previousPasswordValidFor: 20s}, {name: reader, passwordSecret: {name: r, key: pw}, rules: '~* +@read'}, {name: none, passwordSecret: {name: none}}]", ``},
		{"allowed clients by pod and namespace", "version: '7.0.15'\nnetwork: {allowedClients: [{podSelector: {matchLabels: {app: web}}}, {namespaceSelector: {matchLabels: {team: a}}, podSelector: {}}]}", ``},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cc := unstructuredCC(g, ns, "c"+string(rune('a'+i)), tt.spec+"\npaused: true")
			err := k8s.Create(context.Background(), cc)
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tt.wantErr))
		})
	}
}
