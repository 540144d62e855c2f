package binsource

import (
	"context"
	"errors"
	"fmt"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/registryguard"
)

// Reasons a release could not be made available, as condition reasons.
var (
	errInvalidImage    = reason.Sentinel("InvalidImage")
	errNotFound        = reason.Sentinel(registryguard.ReasonNotFound)
	errAuth            = reason.Sentinel(registryguard.ReasonAuthFailed)
	errUntrusted       = reason.Sentinel(registryguard.ReasonNotTrusted)
	errNoBinary        = reason.Sentinel("NoMinIOBinary")
	errChecksum        = reason.Sentinel(binstore.ReasonChecksumMismatch)
	errPullSecret      = reason.Sentinel("PullSecretUnusable")
	errImageTooLarge   = reason.Sentinel(registryguard.ReasonTooLarge)
	errTimeout         = reason.Sentinel(registryguard.ReasonTimeout)
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
