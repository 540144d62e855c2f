// Package autocert provides the upgrade server's serving certificate and
// keeps it current: from files, from a Secret, or from the Kubernetes CSR
// API. Every source offers candidates to one Current, which validates them
// and swaps the served certificate atomically; a bad candidate never
// replaces a good certificate.
package autocert

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// Current is the certificate the upgrade server presents. It implements
// upgradeserver.CertificateSource.
type Current struct {
	log       zerolog.Logger
	validator Validator
	cert      atomic.Pointer[tls.Certificate]

	mu       sync.Mutex
	rejected map[string]string // last rejection logged per origin
}

// NewCurrent returns an empty Current; it is not ready until a source
// offers a valid certificate.
func NewCurrent(log zerolog.Logger, v Validator) *Current {
	return &Current{log: log.With().Str("component", "autocert").Logger(), validator: v, rejected: map[string]string{}}
}

// GetCertificate returns the current certificate; it is called on every
// TLS handshake.
func (c *Current) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert := c.cert.Load()
	if cert == nil {
		return nil, errors.New("no serving certificate yet")
	}
	return cert, nil
}

// Leaf returns the served leaf certificate, or nil.
func (c *Current) Leaf() *x509.Certificate {
	if cert := c.cert.Load(); cert != nil {
		return cert.Leaf
	}
	return nil
}

// Ready reports whether a certificate is being served.
func (c *Current) Ready() error {
	if c.cert.Load() == nil {
		return errors.New("no serving certificate loaded yet")
	}
	return nil
}

// Offer validates a candidate from origin (a human-readable description
// such as `file /etc/tls/tls.crt`) and, if it is valid and differs from the
// served one, swaps it in. kind names the source in the log line, e.g.
// "custom certificate". An invalid candidate is logged once per distinct
// reason and returned as an error; the served certificate stays.
func (c *Current) Offer(kind, origin string, cert *tls.Certificate) error {
	if err := c.validator.Validate(cert); err != nil {
		c.reject(kind, origin, err)
		return fmt.Errorf("%s from %s rejected: %w", kind, origin, err)
	}
	c.mu.Lock()
	delete(c.rejected, origin)
	c.mu.Unlock()
	if old := c.cert.Load(); old != nil && sameChain(old, cert) {
		return nil
	}
	c.cert.Store(cert)
	leaf := cert.Leaf
	c.log.Info().
		Str("source", kind).
		Str("origin", origin).
		Str("subject", leaf.Subject.String()).
		Strs("sans", leaf.DNSNames).
		Str("serial", leaf.SerialNumber.Text(16)).
		Time("notAfter", leaf.NotAfter).
		Msgf("TLS %s loaded: serving it on the upgrade server", kind)
	return nil
}

// Reject records that origin produced no usable candidate (for example a
// Secret without the expected keys) without touching the served
// certificate.
func (c *Current) Reject(kind, origin string, reason error) {
	c.reject(kind, origin, reason)
}

func (c *Current) reject(kind, origin string, reason error) {
	c.mu.Lock()
	seen := c.rejected[origin] == reason.Error()
	c.rejected[origin] = reason.Error()
	c.mu.Unlock()
	if seen {
		return
	}
	ev := c.log.Error().Str("source", kind).Str("origin", origin).Str("reason", reason.Error())
	if cur := c.cert.Load(); cur != nil {
		ev = ev.Str("stillServing", cur.Leaf.SerialNumber.Text(16))
	}
	ev.Msgf("TLS %s rejected: keeping the certificate already served", kind)
}

func sameChain(a, b *tls.Certificate) bool {
	if len(a.Certificate) != len(b.Certificate) {
		return false
	}
	for i := range a.Certificate {
		if !bytes.Equal(a.Certificate[i], b.Certificate[i]) {
			return false
		}
	}
	return true
}
