package autocert

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
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
		return fmt.Errorf("%w: no certificate", errMissing)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("%w: leaf certificate does not parse: %v", errGarbage, err)
	}
	cert.Leaf = leaf
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	if now.Before(leaf.NotBefore) {
		return fmt.Errorf("%w: valid from %s", errNotYetValid, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("%w at %s", errExpired, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if v.DNSName != "" {
		if err := leaf.VerifyHostname(v.DNSName); err != nil {
			return fmt.Errorf("%w: SANs %s do not cover %s", errSANs, describeSANs(leaf), v.DNSName)
		}
	}
	if err := strongKey(leaf); err != nil {
		return err
	}
	return serverAuth(leaf)
}

// strongKey accepts the keys every TLS client of the upgrade server
// verifies and no one can forge: RSA of 2048 bits or more, ECDSA on P-256
// or P-384, Ed25519. A weaker key would be served and then fail (RSA-512)
// or be trusted when it should not be (RSA-1024).
func strongKey(leaf *x509.Certificate) error {
	switch k := leaf.PublicKey.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < 2048 {
			return fmt.Errorf("%w: RSA key of %d bits; at least 2048 are required", errWeakKey, bits)
		}
	case *ecdsa.PublicKey:
		if name := k.Curve.Params().Name; name != "P-256" && name != "P-384" {
			return fmt.Errorf("%w: ECDSA key on curve %s; use P-256 or P-384", errWeakKey, name)
		}
	case ed25519.PublicKey:
	default:
		return fmt.Errorf("%w: unsupported public key type %T", errWeakKey, k)
	}
	return nil
}

// serverAuth rejects a leaf whose extended key usage excludes TLS server
// authentication: every client would refuse it with "incompatible usage".
// A leaf without the extension may serve anything.
func serverAuth(leaf *x509.Certificate) error {
	if len(leaf.ExtKeyUsage) == 0 && len(leaf.UnknownExtKeyUsage) == 0 {
		return nil
	}
	var has []string
	for _, u := range leaf.ExtKeyUsage {
		if u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny {
			return nil
		}
		has = append(has, extKeyUsageName(u))
	}
	for _, oid := range leaf.UnknownExtKeyUsage {
		has = append(has, oid.String())
	}
	return fmt.Errorf("%w: extended key usage is %s, without serverAuth", errKeyUsage, strings.Join(has, ", "))
}

func extKeyUsageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	case x509.ExtKeyUsageCodeSigning:
		return "codeSigning"
	case x509.ExtKeyUsageEmailProtection:
		return "emailProtection"
	case x509.ExtKeyUsageTimeStamping:
		return "timeStamping"
	case x509.ExtKeyUsageOCSPSigning:
		return "OCSPSigning"
	}
	return fmt.Sprintf("usage %d", u)
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

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
