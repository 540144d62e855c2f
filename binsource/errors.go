package binsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/registryguard"
)

// Reasons a release could not be made available, as condition reasons.
var (
	errInvalidImage    = reason.Sentinel("InvalidImage")
	errNotFound        = reason.Sentinel("ImageNotFound")
	errAuth            = reason.Sentinel(registryguard.ReasonAuthFailed)
	errUntrusted       = reason.Sentinel(registryguard.ReasonNotTrusted)
	errNoBinary        = reason.Sentinel("NoMinIOBinary")
	errChecksum        = reason.Sentinel(binstore.ReasonChecksumMismatch)
	errPullSecret      = reason.Sentinel("PullSecretUnusable")
	errImageTooLarge   = reason.Sentinel(registryguard.ReasonTooLarge)
	errTimeout         = reason.Sentinel("PullTimeout")
	errPull            = reason.Sentinel(registryguard.ReasonPullFailed)
	errNoPlatform      = reason.Sentinel("NoBinaryForPlatform") // none for a platform the pods run on
	errStoreFull       = reason.Sentinel("StoreFull")
	errReleaseInFuture = reason.Sentinel("ReleaseInFuture")
	errUnsigned        = reason.Sentinel(binstore.ReasonUnsigned)
	errSignature       = reason.Sentinel(binstore.ReasonSignatureInvalid)
	errBinaryTooLarge  = reason.Sentinel(binstore.ReasonTooLarge)
)

// failures are the reasons a release is not available, with what the user
// can do, in the order reasonOf looks for them: PullTimeout first (a pull
// out of time failed for that, whatever its last request met); a refusal
// inside a PullFailed (a redirect's, say) stays that refusal.
var failures = []struct {
	err    *reason.Error
	remedy string
}{
	{errTimeout, "the registry did not deliver within {pull-timeout}; check it, or raise the timeout"},
	{errInvalidImage, ""},
	{errNotFound, ""},
	{errAuth, ""},
	{errUntrusted, "add the registry's CA to an aistor-ca-tls* Secret in the operator namespace; plain HTTP is used only for hosts in {insecure-registries}"},
	{errNoBinary, "set the ObjectStore's image to a MinIO release image (one that holds opt/bin/minio or usr/bin/minio for the tenant's platform), or set {release-mirror-url} to a mirror of MinIO's release directories"},
	{errChecksum, "the bytes do not match their checksum or digest: the image or registry is corrupt or tampered with"},
	{errPullSecret, "create or fix it: a Secret of type kubernetes.io/dockerconfigjson in the ObjectStore's namespace (kubectl create secret docker-registry)"},
	{errImageTooLarge, "the image's layers exceed {pull-max-bytes}"},
	{errNoPlatform, "use an image that holds a binary for the platform of the tenant's Nodes (kubernetes.io/os, kubernetes.io/arch), check that {platforms} lists it, or pin the tenant's pools to a platform the image has (a nodeSelector on kubernetes.io/arch)"},
	{errReleaseInFuture, "MinIO release names are the time of the release: use an image of a published release (its release/version label or tag no later than now), or fix the operator's clock if it is behind"},
	{errStoreFull, "delete ObjectStores (or move them to images) whose binaries the tenant no longer needs; what its pulls landed counts until housekeeping removes it, {store-unreferenced-grace} after no ObjectStore references it; the platform team sets {store-namespace-max-bytes} and {store-max-bytes}"},
	{errUnsigned, "MinIO's update client installs only binaries with a valid .minisig: use an image that ships minio.minisig, or set {signing-key-secret} so the operator signs binaries of verified images with your platform key, and set MINIO_UPDATE_MINISIGN_PUBKEY on the tenant to its public key"},
	{errSignature, "the .minisig was not made by a trusted key: check the image, or add its signer's public key to {minisign-pubkeys}"},
	{errBinaryTooLarge, "the binary exceeds {max-binary-size}"},
}

// Reasons is every reason of the BinaryAvailable condition, with its
// Event severity and remedy; StoreError is the store's failures of no
// reason of their own (docs/binaries.md).
func Reasons() []reason.Reason {
	list := []reason.Reason{{Name: ReasonAvailable, Severity: reason.Normal}, {Name: errPull.Reason, Severity: reason.Warning},
		{Name: "StoreError", Severity: reason.Warning}, {Name: controller.ReasonInternalError, Severity: reason.Warning}}
	for _, f := range failures {
		list = append(list, reason.Reason{Name: f.err.Reason, Severity: reason.Warning, Remedy: f.remedy})
	}
	return list
}

// ReasonAvailable: the release of spec.image is in the store and served.
const ReasonAvailable = "Available"

// reasonOf returns the condition reason for err: the first failure in its
// chain, else PullTimeout for a deadline, else PullFailed.
func reasonOf(err error) string {
	for _, f := range failures {
		if errors.Is(err, f.err) {
			return f.err.Reason
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errTimeout.Reason
	}
	return errPull.Reason
}

// The operator reaches networks the tenant cannot (a registry may be,
// redirect to or name as its token service an in-cluster server), so a
// condition holds only the operator's words and the pull's own registry's
// errors[], bounded. Raw bodies, other hosts' answers and
// go-containerregistry's texts (which quote bodies) go to the log only.

// reasonf is a failure the operator words itself, safe to show whole:
// its arguments are never text a server sent.
func reasonf(r *reason.Error, format string, args ...any) error {
	return &reason.Error{Reason: r.Reason, Message: r.Reason + ": " + fmt.Sprintf(format, args...)}
}

// pullError is a failure with what a tenant may read (public) apart from
// all of it (cause).
func pullError(r *reason.Error, public string, cause error) *reason.Error {
	return &reason.Error{Reason: r.Reason, Message: public, Err: cause}
}

// detail is everything known about err, bounded, for the operator's log.
func detail(err error) string {
	var re *reason.Error
	if errors.As(err, &re) && re.Err != nil {
		return registryguard.Bounded(re.Err.Error(), 4096)
	}
	return registryguard.Bounded(err.Error(), 4096)
}

// classify turns an error of what ("get <image>") into a pullError.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	// Errors worded here already keep their words, whatever wrapped them.
	var re *reason.Error
	if errors.As(err, &re) {
		return &reason.Error{Reason: re.Reason, Message: what + ": " + re.Error(), Err: err}
	}
	r, public := describe(err)
	return pullError(r, what+": "+public, err)
}

// describe says what went wrong in the operator's words.
func describe(err error) (*reason.Error, string) {
	var terr *transport.Error
	var uerr *url.Error
	var nerr net.Error
	host := "the registry"
	if errors.As(err, &uerr) {
		if u, perr := url.Parse(uerr.URL); perr == nil && u.Host != "" {
			host = registryguard.Bounded(u.Host, 256)
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errTimeout, "timed out waiting for " + host
	case errors.Is(err, context.Canceled):
		return errPull, "canceled"
	case errors.As(err, &terr):
		return statusReason(terr), describeStatus(terr)
	case errors.As(err, new(x509.UnknownAuthorityError)):
		return errUntrusted, "the certificate of " + host + " is signed by an authority the operator does not trust"
	case errors.As(err, new(x509.HostnameError)):
		return errUntrusted, "the certificate of " + host + " is not valid for that name"
	case errors.As(err, new(x509.CertificateInvalidError)):
		return errUntrusted, "the certificate of " + host + " is not valid (expired, not yet valid, or not for serving)"
	case errors.As(err, new(*tls.CertificateVerificationError)):
		return errUntrusted, "the certificate of " + host + " does not verify"
	case errors.Is(err, syscall.ECONNREFUSED):
		return errPull, host + " refused the connection"
	case errors.As(err, new(*net.DNSError)):
		return errPull, "the name of " + host + " does not resolve"
	case errors.As(err, &nerr) && nerr.Timeout():
		return errPull, "timed out talking to " + host
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return errPull, host + " closed the connection early"
	case errors.As(err, new(tls.RecordHeaderError)):
		return errPull, host + " does not answer TLS"
	case errors.As(err, new(*json.SyntaxError)), errors.As(err, new(*json.UnmarshalTypeError)):
		return errPull, "an answer of " + host + " is not the JSON a registry sends"
	case strings.Contains(err.Error(), "does not match requested digest"), strings.Contains(err.Error(), "error verifying sha256 checksum"):
		return errChecksum, "what " + host + " sent does not match its digest"
	case uerr != nil:
		return errPull, "could not talk to " + host
	}
	return errPull, "the answer of " + host + " could not be used (the operator's log has the detail)"
}

// statusReason maps a registry's answer onto a reason.
func statusReason(terr *transport.Error) *reason.Error {
	if r := codeReason(terr.StatusCode); r != errPull {
		return r
	}
	for _, d := range terr.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
			return errNotFound
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			return errAuth
		}
	}
	return errPull
}

// codeReason maps an HTTP status onto a reason.
func codeReason(code int) *reason.Error {
	switch code {
	case http.StatusNotFound:
		return errNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return errAuth
	}
	return errPull
}

// Bounds of what a registry's errors[] contributes to a message.
const (
	maxRegistryErrors   = 3
	maxRegistryCode     = 64
	maxRegistryErrorMsg = 256
)

// describeStatus is "<host> answered <status>", with the first few
// errors[] codes and messages when the pull's registry itself answered.
func describeStatus(terr *transport.Error) string {
	host, fromRegistry := "the registry", false
	if req := terr.Request; req != nil {
		host = registryguard.Bounded(req.URL.Host, 256)
		fromRegistry = registryguard.FromRegistry(req)
	}
	if !fromRegistry { // the token service (QuietElsewhere ends redirects); its body was never read
		return fmt.Sprintf("the registry's token service %s answered %d %s", host, terr.StatusCode, http.StatusText(terr.StatusCode))
	}
	s := fmt.Sprintf("%s answered %d %s", host, terr.StatusCode, http.StatusText(terr.StatusCode))
	var said []string
	for _, d := range terr.Errors {
		if len(said) == maxRegistryErrors {
			said = append(said, fmt.Sprintf("and %d more", len(terr.Errors)-maxRegistryErrors))
			break
		}
		code := registryguard.Bounded(string(d.Code), maxRegistryCode)
		if msg := registryguard.Bounded(d.Message, maxRegistryErrorMsg); msg != "" {
			code += ": " + msg
		}
		said = append(said, code)
	}
	if len(said) > 0 {
		s += " (" + strings.Join(said, "; ") + ")"
	}
	return s
}
