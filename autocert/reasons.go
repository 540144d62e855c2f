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
