package certificates

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"slices"
	"time"
)

// Policy is what a cluster's certificates must be.
type Policy struct {
	// DNSNames the server certificate carries (see Names).
	DNSNames []string
	// Duration is a server certificate's lifetime; RenewBefore how long
	// before its end it is replaced.
	Duration, RenewBefore time.Duration
	// CADuration is the CA's lifetime, stretched to at least
	// MinCALifetimes server lifetimes (each with its renewal margin), so
	// at most two CAs are ever trusted at once.
	CADuration time.Duration
}

// MinCALifetimes is how many server certificate lifetimes (each with its
// renewal margin) a CA lives at least.
const MinCALifetimes = 4

// CALifetime is the lifetime of a CA made under p.
func (p Policy) CALifetime() time.Duration {
	return max(p.CADuration, MinCALifetimes*(p.Duration+p.RenewBefore))
}

// caRenewBefore is how long before its end a CA is replaced: it can
// still sign a whole server lifetime when its successor is made.
func (p Policy) caRenewBefore() time.Duration {
	return p.Duration + p.RenewBefore
}

// caOverlap is how long a new CA is trusted (in every pod's bundle and
// the clients' ConfigMap) before it signs the server certificate.
func (p Policy) caOverlap() time.Duration {
	return p.RenewBefore / 2
}

// CA is one certificate authority the CA Secret holds.
type CA struct {
	Cert *x509.Certificate
	// KeyOK: its private key is present and matches Cert.
	KeyOK bool
	// Since is when it was made (its NotBefore is backdated).
	Since time.Time
}

// canSign: the CA has its key and outlives a certificate signed at now.
func (c *CA) canSign(now time.Time, p Policy) bool {
	return c != nil && c.KeyOK && !now.Add(p.Duration).After(c.Cert.NotAfter)
}

// State is what the cluster's Secrets hold, parsed.
type State struct {
	// Current signs; Previous is the CA before it, trusted until it ends.
	Current, Previous *CA
	// Leaf is the server certificate; LeafKeyOK that its key is present
	// and matches it.
	Leaf      *x509.Certificate
	LeafKeyOK bool
	// Bundle is the server Secret's ca.crt, as PEM.
	Bundle []byte
}

// Signer names a CA of the state after a decision.
type Signer int

const (
	SignCurrent Signer = iota
	SignPrevious
)

// Decision says what to make now and when to look again.
type Decision struct {
	// NewCA: make a new CA (CAReason says why); the current one becomes
	// the previous one, still trusted until it ends.
	NewCA    bool
	CAReason string
	// DropPrevious: the previous CA ended (or a new CA replaces it).
	DropPrevious bool
	// Issue: make a new server certificate (Reason says why), signed by
	// SignWith of the CAs after NewCA and DropPrevious applied.
	Issue    bool
	Reason   string
	SignWith Signer
	// Next is when the decision changes if nothing else does.
	Next time.Time
}

// Decide says what to make at now, given what the Secrets hold.
//
// The CA is replaced when there is none, its key is lost, or it ends
// within Duration+RenewBefore. A new CA is trusted for RenewBefore/2
// before it signs (the old one signs meanwhile, when it can), so pods and
// clients that read the bundle learn it before a server presents a
// certificate it signed. The server certificate is issued when there is
// none, its key is lost, its names differ, its CA is no longer trusted, it
// ends within RenewBefore, the trusted CAs changed (so every pod loads the
// new bundle together with a certificate whose serial day-two can
// confirm), or a new CA takes over signing.
func Decide(now time.Time, st State, p Policy) Decision {
	d := Decision{}
	cur, prev := st.Current, st.Previous
	switch {
	case cur == nil:
		d.NewCA, d.CAReason = true, "no CA yet"
	case !cur.KeyOK:
		d.NewCA, d.CAReason = true, "the CA's private key is missing or does not match it"
	case cur.Cert.NotAfter.Sub(now) <= p.caRenewBefore():
		d.NewCA, d.CAReason = true, fmt.Sprintf("the CA expires at %s, within %s", stamp(cur.Cert.NotAfter), p.caRenewBefore())
	}
	if d.NewCA {
		// The new CA is made now; the current one, if any, is trusted on
		// until it ends (the certificate it signed may be in use).
		prev = cur
		cur = &CA{KeyOK: true, Since: now, Cert: &x509.Certificate{NotBefore: now, NotAfter: now.Add(p.CALifetime())}}
		d.DropPrevious = st.Previous != nil
	}
	if prev != nil && !now.Before(prev.Cert.NotAfter) {
		prev, d.DropPrevious = nil, true
	}
	// The signer: the current CA once trusted for the overlap, else the
	// previous while it can sign.
	d.SignWith = SignCurrent
	trustedFor := now.Sub(cur.Since)
	if trustedFor < p.caOverlap() && prev.canSign(now, p) {
		d.SignWith = SignPrevious
	}
	signer := cur
	if d.SignWith == SignPrevious {
		signer = prev
	}

	trusted := []*x509.Certificate{cur.Cert}
	if prev != nil {
		trusted = append(trusted, prev.Cert)
	}
	switch leaf := st.Leaf; {
	case leaf == nil:
		d.Issue, d.Reason = true, "no server certificate yet"
	case !st.LeafKeyOK:
		d.Issue, d.Reason = true, "the server certificate's private key is missing or does not match it"
	case !sameNames(leaf.DNSNames, p.DNSNames):
		d.Issue, d.Reason = true, fmt.Sprintf("the server certificate names %v, the cluster needs %v", leaf.DNSNames, p.DNSNames)
	case d.NewCA && st.Current != nil && !st.Current.KeyOK:
		d.Issue, d.Reason = true, "the CA that signed the server certificate lost its key"
	case !signedByAny(leaf, trusted, d.NewCA):
		d.Issue, d.Reason = true, "the server certificate's CA is no longer trusted"
	case leaf.NotAfter.Sub(now) <= p.RenewBefore:
		d.Issue, d.Reason = true, fmt.Sprintf("the server certificate expires at %s, within %s", stamp(leaf.NotAfter), p.RenewBefore)
	case d.NewCA || d.DropPrevious || (!d.NewCA && !bytes.Equal(st.Bundle, Bundle(trusted))):
		d.Issue, d.Reason = true, "the trusted CAs changed"
	case !d.NewCA && leaf.CheckSignatureFrom(signer.Cert) != nil:
		d.Issue, d.Reason = true, "a new CA takes over signing"
	}

	// When to look again: the server certificate's renewal, the CA's,
	// the end of the previous CA, the end of the new CA's overlap.
	next := func(t time.Time) {
		if t.After(now) && (d.Next.IsZero() || t.Before(d.Next)) {
			d.Next = t
		}
	}
	leafEnd := now.Add(p.Duration)
	if !d.Issue {
		leafEnd = st.Leaf.NotAfter
	}
	if d.SignWith == SignPrevious && prev.Cert.NotAfter.Before(leafEnd) {
		leafEnd = prev.Cert.NotAfter
	}
	next(leafEnd.Add(-p.RenewBefore))
	next(cur.Cert.NotAfter.Add(-p.caRenewBefore()))
	if prev != nil {
		next(prev.Cert.NotAfter)
	}
	if d.SignWith == SignPrevious {
		next(cur.Since.Add(p.caOverlap()))
	}
	return d
}

// signedByAny: leaf was signed by one of cas; a CA made in this decision
// (the first of cas when fresh) signed nothing yet.
func signedByAny(leaf *x509.Certificate, cas []*x509.Certificate, fresh bool) bool {
	for i, c := range cas {
		if fresh && i == 0 {
			continue
		}
		if leaf.CheckSignatureFrom(c) == nil {
			return true
		}
	}
	return false
}

func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
