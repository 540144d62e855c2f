package binsource

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Reasons a release could not be made available; each is a condition
// reason on the ObjectStore.
var (
	errInvalidImage = errors.New("InvalidImage")
	errNotFound     = errors.New("ImageNotFound")
	errAuth         = errors.New("AuthFailed")
	errUntrusted    = errors.New("RegistryNotTrusted")
	errNoBinary     = errors.New("NoMinIOBinary")
	errChecksum     = errors.New("ChecksumMismatch")
	errPullSecret   = errors.New("PullSecretUnusable")
	errPull         = errors.New("PullFailed")
)

// reason returns the condition reason for err.
func reason(err error) string {
	for _, r := range []error{errInvalidImage, errNotFound, errAuth, errUntrusted, errNoBinary, errChecksum, errPullSecret, errTooLarge} {
		if errors.Is(err, r) {
			if r == errTooLarge {
				return "BinaryTooLarge"
			}
			return r.Error()
		}
	}
	return errPull.Error()
}

// classify maps a registry or transport error onto a reason.
func classify(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return joinReason(errAuth, err)
		case http.StatusNotFound:
			return joinReason(errNotFound, err)
		}
		for _, d := range terr.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
				return joinReason(errNotFound, err)
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return joinReason(errAuth, err)
			}
		}
	}
	var unknownAuthority x509.UnknownAuthorityError
	var verification *tls.CertificateVerificationError
	if errors.As(err, &unknownAuthority) || errors.As(err, &verification) {
		return joinReason(errUntrusted, err)
	}
	return joinReason(errPull, err)
}

type reasonError struct {
	reason error
	err    error
}

func (e *reasonError) Error() string   { return e.err.Error() }
func (e *reasonError) Unwrap() []error { return []error{e.reason, e.err} }

func joinReason(r, err error) error { return &reasonError{reason: r, err: err} }
