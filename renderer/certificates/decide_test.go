package certificates

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

var names = []string{"c", "c.ns", "c.ns.svc", "*.c-headless.ns.svc"}

// policy: 90 days, renewed 7 days before the end, a CA of 10 years.
var policy = Policy{DNSNames: names, Duration: 90 * 24 * time.Hour, RenewBefore: 7 * 24 * time.Hour, CADuration: 10 * 365 * 24 * time.Hour}

// world makes real CAs and certificates at given times, so Decide is
// tested on what ReadState parses from PEM, as the controller calls it.
type world struct {
	t *testing.T
}

func (w world) ca(made time.Time, lifetime time.Duration) Pair {
	w.t.Helper()
	p, err := NewCA(made, "test CA", lifetime)
	if err != nil {
		w.t.Fatal(err)
	}
	return p
}

func (w world) leaf(made time.Time, ca Pair, names []string, lifetime time.Duration) Pair {
	w.t.Helper()
	p, err := Issue(made, ca, "c.ns.svc", names, lifetime)
	if err != nil {
		w.t.Fatal(err)
	}
	return p
}

func bundleOf(t *testing.T, pems ...[]byte) []byte {
	var certs []*x509.Certificate
	for _, p := range pems {
		c, err := ParseCert(p)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	return Bundle(certs)
}

func TestDecide(t *testing.T) {
	w := world{t}
	ca := w.ca(t0, policy.CADuration)
	leaf := w.leaf(t0, ca, names, policy.Duration)
	bundle := bundleOf(t, ca.Cert)
	state := func(caData, srv map[string][]byte) State { return ReadState(caData, srv) }
	caData := map[string][]byte{CACertKey: ca.Cert, CAPrivateKey: ca.Key}
	srv := map[string][]byte{CertKey: leaf.Cert, KeyKey: leaf.Key, CAKey: bundle}
	other := w.ca(t0, policy.CADuration)
	// A CA that ends within duration+renewBefore, and its successor
	// made at that point.
	oldCA := w.ca(t0.Add(-3650*24*time.Hour+96*24*time.Hour), 3650*24*time.Hour)
	oldLeaf := w.leaf(t0.Add(-10*24*time.Hour), oldCA, names, policy.Duration)
	newCA := w.ca(t0, policy.CADuration)

	tests := []struct {
		name      string
		now       time.Time
		given     State
		wantNewCA bool
		wantDrop  bool
		wantIssue string // a part of the reason; "" for no issue
		wantSign  Signer
	}{
		{name: "nothing yet: a CA and a certificate", now: t0, given: State{}, wantNewCA: true, wantIssue: "no server certificate yet"},
		{name: "steady", now: t0.Add(24 * time.Hour), given: state(caData, srv)},
		{name: "just before the renewal margin", now: t0.Add(83*24*time.Hour - time.Minute), given: state(caData, srv)},
		{name: "inside the renewal margin", now: t0.Add(83*24*time.Hour + time.Minute), given: state(caData, srv), wantIssue: "expires at"},
		{name: "expired", now: t0.Add(91 * 24 * time.Hour), given: state(caData, srv), wantIssue: "expires at"},
		{name: "the key does not match the certificate", now: t0, given: state(caData, map[string][]byte{CertKey: leaf.Cert, KeyKey: w.leaf(t0, ca, names, time.Hour).Key, CAKey: bundle}), wantIssue: "private key"},
		{name: "the names changed", now: t0, given: state(caData, map[string][]byte{CertKey: w.leaf(t0, ca, names[:2], policy.Duration).Cert, CAKey: bundle}), wantIssue: "private key"},
		{name: "the names changed, key present", now: t0, given: func() State {
			l := w.leaf(t0, ca, names[:2], policy.Duration)
			return state(caData, map[string][]byte{CertKey: l.Cert, KeyKey: l.Key, CAKey: bundle})
		}(), wantIssue: "names"},
		{name: "signed by a CA no longer trusted", now: t0, given: func() State {
			l := w.leaf(t0, other, names, policy.Duration)
			return state(caData, map[string][]byte{CertKey: l.Cert, KeyKey: l.Key, CAKey: bundle})
		}(), wantIssue: "no longer trusted"},
		{name: "the bundle in the Secret differs", now: t0, given: state(caData, map[string][]byte{CertKey: leaf.Cert, KeyKey: leaf.Key, CAKey: bundleOf(t, other.Cert)}), wantIssue: "trusted CAs changed"},
		{name: "the CA lost its key: a new CA signs at once", now: t0, given: state(map[string][]byte{CACertKey: ca.Cert}, srv), wantNewCA: true, wantIssue: "lost its key", wantSign: SignCurrent},
		{name: "the CA ends within duration+renewBefore: a new CA, the old one signs during the overlap", now: t0,
			given: state(map[string][]byte{CACertKey: oldCA.Cert, CAPrivateKey: oldCA.Key},
				map[string][]byte{CertKey: oldLeaf.Cert, KeyKey: oldLeaf.Key, CAKey: bundleOf(t, oldCA.Cert)}),
			wantNewCA: true, wantIssue: "trusted CAs changed", wantSign: SignPrevious},
		{name: "during the overlap nothing changes", now: t0.Add(3 * 24 * time.Hour),
			given: func() State {
				l := w.leaf(t0, oldCA, names, policy.Duration)
				return state(map[string][]byte{CACertKey: newCA.Cert, CAPrivateKey: newCA.Key, PreviousCACertKey: oldCA.Cert, PreviousCAKey: oldCA.Key},
					map[string][]byte{CertKey: l.Cert, KeyKey: l.Key, CAKey: bundleOf(t, newCA.Cert, oldCA.Cert)})
			}(), wantSign: SignPrevious},
		{name: "after the overlap the new CA takes over", now: t0.Add(4 * 24 * time.Hour),
			given: func() State {
				l := w.leaf(t0, oldCA, names, policy.Duration)
				return state(map[string][]byte{CACertKey: newCA.Cert, CAPrivateKey: newCA.Key, PreviousCACertKey: oldCA.Cert, PreviousCAKey: oldCA.Key},
					map[string][]byte{CertKey: l.Cert, KeyKey: l.Key, CAKey: bundleOf(t, newCA.Cert, oldCA.Cert)})
			}(), wantIssue: "new CA takes over", wantSign: SignCurrent},
		{name: "the previous CA ended: it leaves the bundle", now: t0.Add(97 * 24 * time.Hour),
			given: func() State {
				l := w.leaf(t0.Add(90*24*time.Hour), newCA, names, policy.Duration)
				return state(map[string][]byte{CACertKey: newCA.Cert, CAPrivateKey: newCA.Key, PreviousCACertKey: oldCA.Cert, PreviousCAKey: oldCA.Key},
					map[string][]byte{CertKey: l.Cert, KeyKey: l.Key, CAKey: bundleOf(t, newCA.Cert, oldCA.Cert)})
			}(), wantDrop: true, wantIssue: "trusted CAs changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.now, tt.given, policy)
			if d.NewCA != tt.wantNewCA {
				t.Errorf("NewCA = %v (%s), want %v", d.NewCA, d.CAReason, tt.wantNewCA)
			}
			if d.DropPrevious != tt.wantDrop {
				t.Errorf("DropPrevious = %v, want %v", d.DropPrevious, tt.wantDrop)
			}
			switch {
			case tt.wantIssue == "" && d.Issue:
				t.Errorf("Issue: %s, want none", d.Reason)
			case tt.wantIssue != "" && (!d.Issue || !strings.Contains(d.Reason, tt.wantIssue)):
				t.Errorf("Issue = %v (%q), want a reason with %q", d.Issue, d.Reason, tt.wantIssue)
			}
			if d.SignWith != tt.wantSign {
				t.Errorf("SignWith = %v, want %v", d.SignWith, tt.wantSign)
			}
			if !d.Next.After(tt.now) {
				t.Errorf("Next = %s, not after now %s", d.Next, tt.now)
			}
		})
	}
}

// Renewals over a CA's whole life, with a short CA: the certificate is
// always signed by a CA in the bundle the Secret lists, a new CA is in the
// bundle for the overlap before it signs, and no certificate outlives its
// CA.
func TestDecideOverTheCALifetime(t *testing.T) {
	p := Policy{DNSNames: names, Duration: 4 * time.Minute, RenewBefore: 2 * time.Minute}
	now := t0
	caData := map[string][]byte{}
	var srv map[string][]byte
	firstSigned := map[string]time.Time{} // CA serial → when it first signed
	inBundleSince := map[string]time.Time{}
	renewals, cas := 0, 0
	for now.Before(t0.Add(3 * p.CALifetime())) {
		d := Decide(now, ReadState(caData, srv), p)
		if d.NewCA || d.DropPrevious {
			if d.DropPrevious {
				delete(caData, PreviousCACertKey)
				delete(caData, PreviousCAKey)
			}
			if d.NewCA {
				ca, err := NewCA(now, "ca", p.CALifetime())
				if err != nil {
					t.Fatal(err)
				}
				if len(caData[CACertKey]) > 0 {
					caData[PreviousCACertKey], caData[PreviousCAKey] = caData[CACertKey], caData[CAPrivateKey]
				}
				caData[CACertKey], caData[CAPrivateKey] = ca.Cert, ca.Key
				cas++
			}
		}
		if d.Issue {
			signer := Pair{Cert: caData[CACertKey], Key: caData[CAPrivateKey]}
			if d.SignWith == SignPrevious {
				signer = Pair{Cert: caData[PreviousCACertKey], Key: caData[PreviousCAKey]}
			}
			leaf, err := Issue(now, signer, "c", names, p.Duration)
			if err != nil {
				t.Fatal(err)
			}
			st := ReadState(caData, nil)
			trusted := []*x509.Certificate{st.Current.Cert}
			if st.Previous != nil {
				trusted = append(trusted, st.Previous.Cert)
			}
			srv = map[string][]byte{CertKey: leaf.Cert, KeyKey: leaf.Key, CAKey: Bundle(trusted)}
			renewals++
			for _, c := range trusted {
				if _, ok := inBundleSince[SerialHex(c)]; !ok {
					inBundleSince[SerialHex(c)] = now
				}
			}
			signerCert, _ := ParseCert(signer.Cert)
			if _, ok := firstSigned[SerialHex(signerCert)]; !ok {
				firstSigned[SerialHex(signerCert)] = now
			}
		}
		st := ReadState(caData, srv)
		if !now.Before(st.Leaf.NotAfter) {
			t.Fatalf("at %s the certificate has expired (%s)", now, st.Leaf.NotAfter)
		}
		signedBy := ""
		for _, c := range []*CA{st.Current, st.Previous} {
			if c != nil && st.Leaf.CheckSignatureFrom(c.Cert) == nil {
				signedBy = SerialHex(c.Cert)
				if st.Leaf.NotAfter.After(c.Cert.NotAfter) {
					t.Fatalf("the certificate outlives its CA")
				}
			}
		}
		if signedBy == "" {
			t.Fatalf("at %s the certificate is signed by no CA of the Secret", now)
		}
		if d.Next.IsZero() || !d.Next.After(now) {
			t.Fatalf("at %s Next is %s", now, d.Next)
		}
		now = d.Next
	}
	if cas < 3 {
		t.Fatalf("%d CAs over three CA lifetimes, want at least 3", cas)
	}
	for serial, first := range firstSigned {
		if since := inBundleSince[serial]; since.IsZero() || (first.Sub(since) < p.RenewBefore/2 && !first.Equal(t0)) {
			t.Errorf("CA %s signed at %s, in the bundle since %s: less than the overlap", serial, first, since)
		}
	}
	t.Logf("%d renewals, %d CAs in %s", renewals, cas, now.Sub(t0))
}
