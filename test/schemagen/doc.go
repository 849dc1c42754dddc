// Package schemagen makes random objects from a CRD's own OpenAPI v3 schema,
// for property tests that send them to a real API server: whatever it
// admits must decode into the Go types and render or stall.
//
// It is a test helper: it reads the CRD files from the repository and must
// not be imported by the operator itself. Values are biased towards what the
// schema admits (required fields, enums, bounds, patterns) with a share of
// values just outside the rules and of tricky strings, so that both sides of
// every rule are exercised.
package schemagen
