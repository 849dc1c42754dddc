// Package manifests reads and compares streams of Kubernetes objects
// strictly, for tests that check one way of rendering against another
// (`kubectl cache render` or the chart tests against `helm template`). It
// reads a stream as kubectl apply -f does and reports every field that
// differs; it normalizes nothing and is imported only by tests.
package manifests
