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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/object-store-operator/operator/internal/reason"
)

// Source kinds, as they appear in logs and the source metric.
const (
	KindAutocert = "autocert certificate"
	KindCustom   = "custom certificate"
	KindFiles    = "certificate files"
)

// served is what Current swaps as a whole: the certificate and the CA
// bundle pods need to verify it.
type served struct {
	cert *tls.Certificate
	ca   []byte
	kind string
}

// Current is the certificate the upgrade server presents. It implements
// upgradeserver.CertificateSource.
type Current struct {
	log       zerolog.Logger
	validator Validator
	metrics   *Metrics
	reasons   reason.Set
	cur       atomic.Pointer[served]
	changed   chan struct{}
	// loaded is closed when the first certificate is stored.
	loaded   chan struct{}
	loadOnce sync.Once

	mu       sync.Mutex
	rejected map[string]string // last rejection logged per origin
}

// NewCurrent returns an empty Current; it is not ready until a source
// offers a valid certificate. metrics and reasons may be nil.
func NewCurrent(log zerolog.Logger, v Validator, metrics *Metrics, reasons reason.Set) *Current {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	c := &Current{
		log:       log.With().Str("component", "autocert").Logger(),
		validator: v,
		metrics:   metrics,
		reasons:   reasons,
		changed:   make(chan struct{}, 1),
		loaded:    make(chan struct{}),
		rejected:  map[string]string{},
	}
	metrics.served.Store(c)
	return c
}

// GetCertificate returns the current certificate; it is called on every
// TLS handshake.
func (c *Current) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s := c.cur.Load()
	if s == nil {
		return nil, errors.New("no serving certificate yet")
	}
	return s.cert, nil
}

// Leaf returns the served leaf certificate, or nil.
func (c *Current) Leaf() *x509.Certificate {
	if s := c.cur.Load(); s != nil {
		return s.cert.Leaf
	}
	return nil
}

// CABundle returns the PEM CA bundle pods need to trust the served
// certificate, or nil before the first certificate.
func (c *Current) CABundle() []byte {
	if s := c.cur.Load(); s != nil {
		return s.ca
	}
	return nil
}

// Changed is signalled (buffered, never blocking the sender) after each
// swap, for consumers of CABundle such as the mount-secret controller.
func (c *Current) Changed() <-chan struct{} { return c.changed }

// Loaded reports whether a certificate has been loaded: one that was
// valid when offered (it may have expired since; Ready tells).
func (c *Current) Loaded() bool { return c.cur.Load() != nil }

// WhenLoaded is closed once a certificate has been loaded, as Loaded
// says: what waits for it may act on the CA pods are to trust. An
// operator offered only certificates the validator rejects never closes
// it, so nothing that must go on without a certificate may wait for it.
func (c *Current) WhenLoaded() <-chan struct{} { return c.loaded }

// Ready reports whether a valid certificate is being served. The last
// good certificate keeps being served after it expires (nothing better is
// at hand), but the replica is then not ready: every client refuses it.
func (c *Current) Ready() error {
	s := c.cur.Load()
	if s == nil {
		if why := c.rejections(); why != "" {
			return fmt.Errorf("no serving certificate loaded yet: %s", why)
		}
		return errors.New("no serving certificate loaded yet")
	}
	now := time.Now()
	if c.validator.Now != nil {
		now = c.validator.Now()
	}
	if leaf := s.cert.Leaf; leaf != nil && now.After(leaf.NotAfter) {
		return fmt.Errorf("the served certificate expired at %s and no valid one has replaced it", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// rejections says why each origin's last candidate was refused, for
// /readyz: the cause, not only the symptom.
func (c *Current) rejections() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for origin, reason := range c.rejected {
		out = append(out, origin+": "+reason)
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// Offer validates a candidate of the given kind from origin (for example
// `Secret ops/object-store-operator-tls`) and, if it is valid and differs
// from the served one, swaps it in together with caBundle (PEM; nil means
// the chain's root, if the chain carries one). An invalid candidate is
// logged once per distinct reason and returned as an error; the served
// certificate stays.
func (c *Current) Offer(kind, origin string, cert *tls.Certificate, caBundle []byte) error {
	if err := c.validator.Validate(cert); err != nil {
		c.Reject(kind, origin, err)
		return fmt.Errorf("%s from %s rejected: %w", kind, origin, err)
	}
	c.mu.Lock()
	delete(c.rejected, origin)
	c.mu.Unlock()
	if len(caBundle) == 0 {
		caBundle = chainRoot(cert)
	}
	old := c.cur.Load()
	if old != nil && sameChain(old.cert, cert) && bytes.Equal(old.ca, caBundle) {
		return nil
	}
	// The trust warning comes before the "loaded" line, so whoever sees
	// that line has seen any warning about it too; both come before the
	// certificate is served, so whoever sees the replica ready (the
	// seed's grep after a rollout restart) finds the line.
	c.checkTrust(kind, origin, cert, caBundle)
	leaf := cert.Leaf
	c.metrics.reloads.Inc()
	c.log.Info().
		Str("source", kind).
		Str("origin", origin).
		Str("subject", leaf.Subject.String()).
		Strs("sans", leaf.DNSNames).
		Str("issuer", leaf.Issuer.String()).
		Str("serial", leaf.SerialNumber.Text(16)).
		Time("notAfter", leaf.NotAfter).
		Msgf("TLS %s loaded: serving it on the upgrade server", kind)
	c.cur.Store(&served{cert: cert, ca: caBundle, kind: kind})
	c.loadOnce.Do(func() { close(c.loaded) })
	select {
	case c.changed <- struct{}{}:
	default:
	}
	return nil
}

// Reject records that origin produced no usable candidate (for example a
// Secret without the expected keys) without touching the served
// certificate.
func (c *Current) Reject(kind, origin string, reason error) {
	c.mu.Lock()
	seen := c.rejected[origin] == reason.Error()
	c.rejected[origin] = reason.Error()
	c.mu.Unlock()
	if seen {
		return
	}
	c.metrics.rejected.WithLabelValues(reasonOf(reason)).Inc()
	ev := c.log.Error().Str("source", kind).Str("origin", origin).Str("reason", reason.Error())
	s := c.cur.Load()
	if s == nil {
		ev.Msgf("TLS %s rejected: %s: %s; nothing is served yet (TLS handshakes fail and the replica is not ready until a valid certificate arrives)",
			kind, origin, reason)
		return
	}
	ev.Str("stillServing", s.cert.Leaf.SerialNumber.Text(16)).
		Msgf("TLS %s rejected: %s: %s; keeping the certificate already served", kind, origin, reason)
}

// checkTrust verifies the leaf against the bundle pods will be given and,
// when it does not verify, says in the log what pods will see and why.
func (c *Current) checkTrust(kind, origin string, cert *tls.Certificate, caBundle []byte) {
	err := verifyAgainst(cert, caBundle, c.validator.DNSName)
	if err == nil {
		return
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) && !errors.Is(err, errEmptyBundle) {
		// Not a trust problem: say what pods will see instead.
		c.log.Warn().Str("source", kind).Str("origin", origin).Str("reason", err.Error()).
			Msg("MinIO pods will fail to verify the served certificate: " + err.Error())
		return
	}
	c.log.Warn().
		Str("source", kind).
		Str("origin", origin).
		Str("issuer", cert.Leaf.Issuer.String()).
		Str("reason", err.Error()).
		Msg("MinIO pods will fail to update with \"x509: certificate signed by unknown authority\": the served certificate " +
			"does not verify against the CA bundle (ca.crt) the operator gives the pods. Likely causes: the kubelet-serving " +
			"signer's CA differs from the cluster CA; the certificate was renewed by a CA the pods do not trust; the cluster " +
			"uses a non-standard CSR signer. Remedy: " +
			remedy(c.reasons, ReasonUntrustedCA, "give the pods the CA that signed the served certificate, or serve one signed by a CA they trust"))
}

var errEmptyBundle = errors.New("no CA certificate in the bundle")

func verifyAgainst(cert *tls.Certificate, caBundle []byte, dnsName string) error {
	pool := x509.NewCertPool()
	if len(caBundle) == 0 || !pool.AppendCertsFromPEM(caBundle) {
		return errEmptyBundle
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	_, err := cert.Leaf.Verify(x509.VerifyOptions{
		DNSName: dnsName, Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

// chainRoot returns the last certificate of the chain as PEM when it is a
// CA, the usual shape of a full chain ending in its root.
func chainRoot(cert *tls.Certificate) []byte {
	if len(cert.Certificate) < 2 {
		return nil
	}
	last, err := x509.ParseCertificate(cert.Certificate[len(cert.Certificate)-1])
	if err != nil || !last.IsCA {
		return nil
	}
	return pemCert(last.Raw)
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
