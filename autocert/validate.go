package autocert

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Validator decides whether a candidate certificate may be served.
type Validator struct {
	// DNSName must be covered by the leaf's SANs, e.g.
	// object-store-operator.<ns>.svc; empty skips that check (file mode
	// outside Kubernetes).
	DNSName string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Validate checks that cert has a parsable leaf, that the private key
// belongs to it, that it is inside its validity window and that its SANs
// cover DNSName. It fills cert.Leaf.
func (v Validator) Validate(cert *tls.Certificate) error {
	if cert == nil || len(cert.Certificate) == 0 {
		return errors.New("no certificate")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("leaf certificate does not parse: %w", err)
	}
	cert.Leaf = leaf
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	if now.Before(leaf.NotBefore) {
		return fmt.Errorf("not yet valid: valid from %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if v.DNSName != "" {
		if err := leaf.VerifyHostname(v.DNSName); err != nil {
			return fmt.Errorf("SANs %s do not cover %s", describeSANs(leaf), v.DNSName)
		}
	}
	return nil
}

// ParseKeyPair builds a certificate from PEM, with reasons a person can act
// on instead of crypto/tls's terse ones. certPEM may hold the full chain.
func ParseKeyPair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	switch {
	case len(strings.TrimSpace(string(certPEM))) == 0 && len(strings.TrimSpace(string(keyPEM))) == 0:
		return nil, errors.New("certificate and private key are both missing or empty")
	case len(strings.TrimSpace(string(certPEM))) == 0:
		return nil, errors.New("certificate is missing or empty")
	case len(strings.TrimSpace(string(keyPEM))) == 0:
		return nil, errors.New("private key is missing or empty")
	}
	if !hasPEMBlock(certPEM, "CERTIFICATE") {
		return nil, errors.New("certificate holds no PEM CERTIFICATE block (garbage or wrong key?)")
	}
	if !hasPEMBlock(keyPEM, "PRIVATE KEY") {
		return nil, errors.New("private key holds no PEM PRIVATE KEY block (garbage or wrong key?)")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "type does not match"):
			return nil, fmt.Errorf("private key type does not match the certificate's key type (RSA/ECDSA/Ed25519 mix-up): %w", err)
		case strings.Contains(msg, "does not match"):
			return nil, fmt.Errorf("private key belongs to another certificate: %w", err)
		default:
			return nil, fmt.Errorf("cannot parse key pair: %w", err)
		}
	}
	return &cert, nil
}

func hasPEMBlock(data []byte, suffix string) bool {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return false
		}
		if strings.HasSuffix(block.Type, suffix) {
			return true
		}
	}
}

func describeSANs(leaf *x509.Certificate) string {
	sans := append([]string{}, leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		sans = append(sans, ip.String())
	}
	if len(sans) == 0 {
		return "[] (none)"
	}
	return "[" + strings.Join(sans, " ") + "]"
}
