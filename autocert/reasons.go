package autocert

import (
	"errors"

	"github.com/object-store-operator/operator/internal/pemutil"
	"github.com/object-store-operator/operator/internal/reason"
)

// Reasons a candidate certificate is rejected, for metrics and alerts.
// Errors wrap one of them; reasonOf maps an error back to its label.
var (
	errMissing     = pemutil.ErrMissing
	errGarbage     = pemutil.ErrGarbage
	errKeyMismatch = pemutil.ErrKeyMismatch
	errExpired     = errors.New("expired")
	errNotYetValid = errors.New("not yet valid")
	errSANs        = errors.New("SANs do not cover the service")
	errWeakKey     = errors.New("weak key")
	errKeyUsage    = errors.New("not for TLS servers")
	errDeleted     = errors.New("deleted")
	errForeign     = errors.New("written by another issuer")
)

// Reasons autocert reports with a remedy whose words depend on how the
// operator is configured: Reasons words it with the settings' flags, which
// whoever wires the package spells (reason.Spell).
const (
	// ReasonUntrustedCA: the served certificate does not verify against
	// the CA bundle pods are given.
	ReasonUntrustedCA = "UntrustedCA"
	// ReasonForeignSecret: the autocert Secret holds a certificate
	// another issuer wrote (Ownership). A remedy's "<secret>" is the
	// Secret's name.
	ReasonForeignSecret = "ForeignSecret"
	// ReasonCSRFailed: an attempt to get a certificate failed.
	ReasonCSRFailed = "CSRFailed"
	// ReasonAwaitingApproval: the operator does not approve its own CSR.
	ReasonAwaitingApproval = "AwaitingApproval"
)

// Reasons is every reason autocert reports with a remedy, in the
// operator's words (settings named by flag, see reason.Spell).
func Reasons() []reason.Reason {
	return []reason.Reason{
		{Name: ReasonUntrustedCA, Severity: reason.Warning,
			Remedy: "put the signing CA into ca.crt of the Secret named by {serving-ca-secret}, or serve a custom " +
				"certificate ({auto-cert-disabled}=on, {custom-tls-secret-name}) signed by a CA the pods trust"},
		{Name: ReasonForeignSecret, Severity: reason.Warning,
			Remedy: "To serve it, set {auto-cert-disabled}=on and {custom-tls-secret-name}=<secret> and restart the operator; " +
				"to let autocert manage it again, stop whatever writes it (delete the cert-manager Certificate) and delete the Secret"},
		{Name: ReasonCSRFailed, Severity: reason.Warning,
			Remedy: "If the signer does not sign (not kubernetes.io/kubelet-serving-capable, EKS, or approvals are blocked), " +
				"set {csr-signer-name}, or use a custom certificate: {auto-cert-disabled}=on and {custom-tls-secret-name}=<secret>"},
		{Name: ReasonAwaitingApproval, Severity: reason.Normal, Remedy: "{autocert-approve}=off"},
	}
}

// remedy is what the user can do about the reason name in set's words,
// else fallback.
func remedy(set reason.Set, name, fallback string) string {
	if r := set.Remedy(name); r != "" {
		return r
	}
	return fallback
}

func reasonOf(err error) string {
	for _, r := range []struct {
		err   error
		label string
	}{
		{errMissing, "missing"}, {errGarbage, "garbage"}, {errKeyMismatch, "key_mismatch"},
		{errExpired, "expired"}, {errNotYetValid, "not_yet_valid"}, {errSANs, "sans"}, {errDeleted, "deleted"}, {errForeign, "foreign"},
		{errWeakKey, "weak_key"}, {errKeyUsage, "key_usage"},
	} {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return "other"
}
