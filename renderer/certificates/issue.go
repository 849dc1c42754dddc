package certificates

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Keys of the Secrets and the ConfigMap.
const (
	// CertKey, KeyKey and CAKey are the server Secret's keys, the names
	// cert-manager and kubernetes.io/tls Secrets use: the certificate,
	// its key and the trusted CAs (the bundle).
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
	CAKey   = "ca.crt"
	// CA Secret: the current CA's certificate and key, and the previous
	// CA's, trusted until it ends.
	CACertKey         = "ca.crt"
	CAPrivateKey      = "ca.key"
	PreviousCACertKey = "previous-ca.crt"
	PreviousCAKey     = "previous-ca.key"
)

// caBackdate is how far a CA's NotBefore lies before it was made, for
// clocks a little behind; leafBackdate the same for server certificates.
const (
	caBackdate   = time.Hour
	leafBackdate = 5 * time.Minute
)

// Pair is a certificate and its key as PEM.
type Pair struct {
	Cert, Key []byte
}

// NewCA makes a CA named for a cluster, valid for lifetime from now.
func NewCA(now time.Time, commonName string, lifetime time.Duration) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"cacheops"}},
		NotBefore:             now.Add(-caBackdate),
		NotAfter:              now.Add(lifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return Pair{}, err
	}
	return encodePair(der, key)
}

// Issue makes a server certificate for names, valid for lifetime from now
// (never past the CA's end), signed by ca.
func Issue(now time.Time, ca Pair, commonName string, names []string, lifetime time.Duration) (Pair, error) {
	caCert, caKey, err := ParsePair(ca)
	if err != nil {
		return Pair{}, fmt.Errorf("the CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return Pair{}, err
	}
	end := now.Add(lifetime)
	if end.After(caCert.NotAfter) {
		end = caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"cacheops"}},
		DNSNames:     names,
		NotBefore:    now.Add(-leafBackdate),
		NotAfter:     end,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Client auth too: a replica and a cluster-bus peer present the
		// same certificate when the server they connect to asks for one.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return Pair{}, err
	}
	return encodePair(der, key)
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func encodePair(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
	}, nil
}

// ParseCert reads the first certificate of a PEM text.
func ParseCert(b []byte) (*x509.Certificate, error) {
	for len(b) > 0 {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
	return nil, errors.New("no PEM certificate")
}

// ParseCerts reads every certificate of a PEM text.
func ParseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for len(b) > 0 {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// ParsePair reads a certificate and its key and checks that they belong
// together.
func ParsePair(p Pair) (*x509.Certificate, crypto.Signer, error) {
	cert, err := ParseCert(p.Cert)
	if err != nil {
		return nil, nil, err
	}
	blk, _ := pem.Decode(p.Key)
	if blk == nil {
		return cert, nil, errors.New("no PEM private key")
	}
	var key any
	switch blk.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	default:
		err = fmt.Errorf("unknown private key type %q", blk.Type)
	}
	if err != nil {
		return cert, nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return cert, nil, errors.New("the private key cannot sign")
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return cert, nil, errors.New("the private key does not match the certificate")
	}
	return cert, signer, nil
}

// SerialHex is a certificate's serial number as status.tls.serial shows
// it: lower-case hex.
func SerialHex(c *x509.Certificate) string {
	return c.SerialNumber.Text(16)
}

// Bundle is the PEM of cas, in order.
func Bundle(cas []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range cas {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

// ReadCA parses one CA of the CA Secret; nil when there is none.
func ReadCA(cert, key []byte) *CA {
	if len(cert) == 0 {
		return nil
	}
	c, _, err := ParsePair(Pair{Cert: cert, Key: key})
	if c == nil {
		return nil
	}
	return &CA{Cert: c, KeyOK: err == nil, Since: c.NotBefore.Add(caBackdate)}
}

// ReadState parses the CA Secret's and the server Secret's data (either
// may be nil).
func ReadState(caData, serverData map[string][]byte) State {
	st := State{
		Current:  ReadCA(caData[CACertKey], caData[CAPrivateKey]),
		Previous: ReadCA(caData[PreviousCACertKey], caData[PreviousCAKey]),
		Bundle:   serverData[CAKey],
	}
	if leaf, _, err := ParsePair(Pair{Cert: serverData[CertKey], Key: serverData[KeyKey]}); leaf != nil {
		st.Leaf, st.LeafKeyOK = leaf, err == nil
	}
	return st
}
