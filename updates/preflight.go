package updates

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/object-store-operator/operator/internal/reason"
)

// errNoCertificateYet: the upgrade server has no certificate loaded yet.
// A restarted operator's caches sync before it has read its Secret or
// filed its CSR, and a certificate may never come (a CSR nobody
// approves). Either way it is no verdict on the tenant, which would
// trust the certificate a moment away: no update starts, and none is
// rolled for it (start). What needs no certificate (following, ending
// and rolling back updates in flight) goes on.
var errNoCertificateYet = errors.New("the upgrade server has no serving certificate loaded yet")

// preflight checks, before any call, that the tenant will trust the
// upgrade server: the tenant's CAs must verify the server's current
// certificate for the update URL's host. MinIO would otherwise fail every
// node with "x509: certificate signed by unknown authority".
func (c *Controller) preflight(roots *x509.CertPool, updateURL string, now time.Time) error {
	u, err := url.Parse(updateURL)
	if err != nil {
		return fmt.Errorf("update URL %q: %w", updateURL, err)
	}
	if u.Scheme != "https" {
		return nil
	}
	if c.cfg.Serving == nil {
		return reason.Errorf(CauseOperatorNotTrusted, "the update URL %s is https but the upgrade server serves plain HTTP", u.Redacted())
	}
	cert, err := c.cfg.Serving.GetCertificate(nil)
	if err != nil || cert == nil || len(cert.Certificate) == 0 {
		return errNoCertificateYet
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return reason.Errorf(CauseOperatorNotTrusted, "the upgrade server's certificate does not parse: %v", err)
		}
	}
	intermediates := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			intermediates.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		DNSName: u.Hostname(), Roots: roots, Intermediates: intermediates, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return reason.Errorf(CauseOperatorNotTrusted, "the tenant's CAs (its generated Secret's CAs.* keys, MinIO's certs/CAs) do not verify the upgrade server's certificate for %s: %v",
			u.Hostname(), err)
	}
	return nil
}
