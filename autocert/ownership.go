package autocert

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/object-store-operator/operator/internal/pemutil"
)

// FingerprintAnnotation on the autocert Secret records the SHA-256 of the
// leaf certificate (DER, hex) autocert stored in it. A certificate that
// does not match it was written by someone else, whatever labels and
// annotations that writer kept: cert-manager, for one, applies only its
// own fields and leaves the operator's label in place.
const FingerprintAnnotation = "aistor.min.io/certificate-sha256"

// cert-manager writes these on every Secret a Certificate fills.
const (
	certManagerCertificateAnnotation = "cert-manager.io/certificate-name"
	certManagerIssuerAnnotation      = "cert-manager.io/issuer-name"
	certManagerIssuerKindAnnotation  = "cert-manager.io/issuer-kind"
)

// Foreign says why the autocert Secret is not autocert's to write; the
// empty Foreign (Owned) means it is.
type Foreign string

// Why a Secret is another issuer's. The values are log reasons; Label
// gives the metric's.
const (
	// Owned: autocert created the Secret and its certificate is the one
	// autocert stored (or it holds none yet).
	Owned Foreign = ""
	// ForeignCertManager: cert-manager's annotations; a Certificate
	// writes the Secret.
	ForeignCertManager Foreign = "CertManagerSecret"
	// ForeignUnlabelled: the Secret lacks the managed-by label; the
	// operator did not create it.
	ForeignUnlabelled Foreign = "NotCreatedByOperator"
	// ForeignCertificate: the Secret's certificate is not the one
	// autocert recorded storing.
	ForeignCertificate Foreign = "CertificateNotFromAutocert"
)

// Label is the reason as the objectstore_operator_autocert_foreign_secret
// metric spells it.
func (f Foreign) Label() string {
	switch f {
	case ForeignCertManager:
		return "cert_manager"
	case ForeignUnlabelled:
		return "unlabelled"
	case ForeignCertificate:
		return "certificate_changed"
	}
	return ""
}

// Ownership decides whether autocert may write Secret s (nil: it does not
// exist, autocert creates it) and, when it may not, why, in words that
// name the other writer. The rule, first match wins:
//
//   - cert-manager's annotations: cert-manager's;
//   - no managed-by label: not created by the operator;
//   - no certificate at all: autocert's to fill;
//   - a recorded fingerprint: autocert's only if the certificate matches it;
//   - no fingerprint (stored by a version that did not record one):
//     autocert's if it names the CSR it came from, as autocert always did.
//
// It is a pure function of the Secret, so the Issuer (which writes) and
// the SecretSource (which serves) always agree.
func Ownership(s *corev1.Secret) (Foreign, string) {
	if s == nil {
		return Owned, ""
	}
	if cert := s.Annotations[certManagerCertificateAnnotation]; cert != "" || s.Annotations[certManagerIssuerAnnotation] != "" {
		return ForeignCertManager, fmt.Sprintf("cert-manager wrote its certificate (Certificate %q, issuer %s %q)",
			cert, s.Annotations[certManagerIssuerKindAnnotation], s.Annotations[certManagerIssuerAnnotation])
	}
	if s.Labels[ManagedByLabel] != ManagedByValue {
		return ForeignUnlabelled, fmt.Sprintf("the operator did not create it (it lacks the label %s=%s)", ManagedByLabel, ManagedByValue)
	}
	certPEM := s.Data[pemutil.KeyTLSCert]
	if len(certPEM) == 0 {
		certPEM = s.Data[pemutil.KeyPublicCert]
	}
	if len(certPEM) == 0 {
		return Owned, ""
	}
	recorded := s.Annotations[FingerprintAnnotation]
	if recorded == "" {
		if s.Annotations[CSRAnnotation] != "" {
			return Owned, ""
		}
		return ForeignCertificate, fmt.Sprintf("its certificate was not stored by autocert (no %s annotation)", FingerprintAnnotation)
	}
	if got := fingerprintPEM(certPEM); got != recorded {
		return ForeignCertificate, fmt.Sprintf("its certificate (sha256 %s) is not the one autocert stored (sha256 %s in %s)",
			short(got), short(recorded), FingerprintAnnotation)
	}
	return Owned, ""
}

// fingerprint is the hex SHA-256 of a certificate's DER.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// fingerprintPEM is the fingerprint of the first certificate in certPEM,
// "none" when there is none.
func fingerprintPEM(certPEM []byte) string {
	for {
		var block *pem.Block
		block, certPEM = pem.Decode(certPEM)
		if block == nil {
			return "none"
		}
		if block.Type == "CERTIFICATE" {
			return fingerprint(block.Bytes)
		}
	}
}

func short(fp string) string {
	if len(fp) > 16 {
		return fp[:16] + "…"
	}
	return fp
}
