package main

import (
	"net/http/httptest"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		method, url, contentType string
		verb, resource           string
	}{
		{"GET", "/api/v1/namespaces/ns/pods?labelSelector=a%3Db", "", "list", "pods"},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=1", "", "watch", "pods"},
		{"GET", "/api/v1/namespaces/ns/secrets/auth", "", "get", "secrets"},
		{"GET", "/api/v1/pods", "", "list", "pods"},
		{"GET", "/api/v1/namespaces/ns", "", "get", "namespaces"},
		{"PATCH", "/apis/cache.cacheops.io/v1alpha1/namespaces/ns/cacheclusters/fo/status", "application/merge-patch+json", "patch", "cacheclusters/status"},
		{"PATCH", "/apis/apps/v1/namespaces/ns/statefulsets/fo?fieldManager=cacheops&force=true", "application/apply-patch+yaml", "apply", "statefulsets"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/ns/events", "application/json", "create", "events"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/id", "application/json", "update", "leases"},
		{"DELETE", "/api/v1/namespaces/ns/pods/fo-0", "", "delete", "pods"},
		{"DELETE", "/api/v1/namespaces/ns/pods", "", "deletecollection", "pods"},
		{"GET", "/apis", "", "list", ""},
		{"GET", "/version", "", "list", ""},
	} {
		req := httptest.NewRequest(c.method, c.url, nil)
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		verb, resource := classify(req)
		if verb != c.verb || resource != c.resource {
			t.Errorf("%s %s: got %s %q, want %s %q", c.method, c.url, verb, resource, c.verb, c.resource)
		}
	}
}
