package binsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/object-store-operator/operator/binstore"
)

// Reasons a release could not be made available; each is a condition
// reason on the ObjectStore. Reasons about the binary itself (checksum,
// signature, conflict, size) come from binstore.
var (
	errInvalidImage  = errors.New("InvalidImage")
	errNotFound      = errors.New("ImageNotFound")
	errAuth          = errors.New("AuthFailed")
	errUntrusted     = errors.New("RegistryNotTrusted")
	errNoBinary      = errors.New("NoMinIOBinary")
	errChecksum      = errors.New(string(binstore.ReasonChecksumMismatch))
	errPullSecret    = errors.New("PullSecretUnusable")
	errImageTooLarge = errors.New("ImageTooLarge")
	errTimeout       = errors.New("PullTimeout")
	errPull          = errors.New("PullFailed")
)

// reason returns the condition reason for err.
func reason(err error) string {
	for _, r := range []error{errTimeout, errInvalidImage, errNotFound, errAuth, errUntrusted, errNoBinary, errChecksum, errPullSecret, errImageTooLarge} {
		if errors.Is(err, r) {
			return r.Error()
		}
	}
	if r := binstore.ReasonOf(err); r != binstore.ReasonOther {
		return string(r)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errTimeout.Error()
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
	if errors.As(err, &unknownAuthority) || errors.As(err, &verification) || errors.Is(err, errUntrusted) {
		return joinReason(errUntrusted, err)
	}
	if errors.Is(err, errImageTooLarge) || errors.Is(err, errChecksum) || binstore.ReasonOf(err) != binstore.ReasonOther {
		return err
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
