package main

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// apiRequests counts the manager's requests to the API server by verb and
// resource, which client-go's rest_client_requests_total does not split:
// a steady state should write nothing, and when it does this says what
// (docs/scale.md). Leader election's Lease renewals are counted too, as
// resource "leases".
var apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "cacheops_api_requests_total",
	Help: "Requests the manager sent to the API server, by verb (get, list, watch, create, update, patch, apply, delete, deletecollection) and resource (with its subresource, e.g. cacheclusters/status).",
}, []string{"verb", "resource"})

func init() { metrics.Registry.MustRegister(apiRequests) }

// countRequests makes every client built from cfg count its requests in
// apiRequests.
func countRequests(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			verb, resource := classify(req)
			apiRequests.WithLabelValues(verb, resource).Inc()
			return rt.RoundTrip(req)
		})
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// classify names a request's verb and resource from its method and path:
// /api/v1/namespaces/NS/RESOURCE/NAME/SUB or /apis/GROUP/VERSION/...;
// a path that names no resource (discovery, /version) is resource "".
func classify(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		parts = nil
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		// A namespaced resource; "namespaces/NS" alone is the namespace.
		parts = parts[2:]
	}
	named := len(parts) >= 2
	switch len(parts) {
	case 0:
	case 1, 2:
		resource = parts[0]
	default:
		resource = parts[0] + "/" + parts[2]
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
		if req.Header.Get("Content-Type") == "application/apply-patch+yaml" {
			verb = "apply"
		}
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb, resource
}
