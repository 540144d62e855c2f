package autocert

import "errors"

// Reasons a candidate certificate is rejected, for metrics and alerts.
// Errors wrap one of them; reasonOf maps an error back to its label.
var (
	errMissing     = errors.New("missing")
	errGarbage     = errors.New("garbage")
	errKeyMismatch = errors.New("key mismatch")
	errExpired     = errors.New("expired")
	errNotYetValid = errors.New("not yet valid")
	errSANs        = errors.New("SANs do not cover the service")
	errWeakKey     = errors.New("weak key")
	errKeyUsage    = errors.New("not for TLS servers")
	errDeleted     = errors.New("deleted")
)

// Problem is a situation whose remedy depends on how the operator is
// configured. The package says what happened; whoever wires it supplies
// the remedy in the user's words (Remedy).
type Problem string

// Problems with a remedy.
const (
	// ProblemUntrustedCA: the served certificate does not verify against
	// the CA bundle pods are given.
	ProblemUntrustedCA Problem = "UntrustedCA"
	// ProblemForeignSecret: the autocert Secret exists and was not created
	// by the operator.
	ProblemForeignSecret Problem = "ForeignSecret"
	// ProblemCSRFailed: an attempt to get a certificate failed.
	ProblemCSRFailed Problem = "CSRFailed"
	// ProblemAwaitingApproval: the operator does not approve its own CSR.
	ProblemAwaitingApproval Problem = "AwaitingApproval"
)

// Remedy returns what the user can do about a problem; "" for nothing to
// add.
type Remedy func(Problem) string

func (r Remedy) or(p Problem, fallback string) string {
	if r != nil {
		if s := r(p); s != "" {
			return s
		}
	}
	return fallback
}

func reasonOf(err error) string {
	for _, r := range []struct {
		err   error
		label string
	}{
		{errMissing, "missing"}, {errGarbage, "garbage"}, {errKeyMismatch, "key_mismatch"},
		{errExpired, "expired"}, {errNotYetValid, "not_yet_valid"}, {errSANs, "sans"}, {errDeleted, "deleted"},
		{errWeakKey, "weak_key"}, {errKeyUsage, "key_usage"},
	} {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return "other"
}
