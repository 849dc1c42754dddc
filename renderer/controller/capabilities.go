package controller

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/discovery"

	"github.com/cacheops/cacheops/renderer"
)

// CapabilitiesSource tells the renderer what the cluster serves.
type CapabilitiesSource interface {
	Get(ctx context.Context) (renderer.Capabilities, error)
}

// StaticCapabilities always returns the same capabilities; tests use it.
type StaticCapabilities renderer.Capabilities

// Get returns the capabilities.
func (s StaticCapabilities) Get(context.Context) (renderer.Capabilities, error) {
	return renderer.Capabilities(s), nil
}

// DiscoveryCapabilities reads the server version and API versions from
// discovery and keeps them for a while: they change only when the cluster is
// upgraded or a CRD is installed.
type DiscoveryCapabilities struct {
	client discovery.DiscoveryInterface
	ttl    time.Duration

	mu      sync.Mutex
	caps    renderer.Capabilities
	fetched time.Time
}

// NewDiscoveryCapabilities reads capabilities through a discovery client.
func NewDiscoveryCapabilities(dc discovery.DiscoveryInterface, ttl time.Duration) *DiscoveryCapabilities {
	return &DiscoveryCapabilities{client: dc, ttl: ttl}
}

// Get returns the cluster's capabilities, from memory when recent enough.
func (d *DiscoveryCapabilities) Get(context.Context) (renderer.Capabilities, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.fetched.IsZero() && time.Since(d.fetched) < d.ttl {
		return d.caps, nil
	}
	version, err := d.client.ServerVersion()
	if err != nil {
		return renderer.Capabilities{}, fmt.Errorf("server version: %w", err)
	}
	// Partial discovery failures (an aggregated API down) still give the
	// groups that answered, which is what Helm does too.
	_, resources, err := d.client.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return renderer.Capabilities{}, fmt.Errorf("server resources: %w", err)
	}
	seen := map[string]bool{}
	for _, list := range resources {
		seen[list.GroupVersion] = true
		for _, res := range list.APIResources {
			seen[list.GroupVersion+"/"+res.Kind] = true
		}
	}
	versions := make([]string, 0, len(seen))
	for v := range seen {
		versions = append(versions, v)
	}
	sort.Strings(versions)
	d.caps = renderer.Capabilities{KubeVersion: version.GitVersion, APIVersions: versions}
	d.fetched = time.Now()
	return d.caps, nil
}
