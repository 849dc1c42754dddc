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
