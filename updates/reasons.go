package updates

import (
	"errors"
	"fmt"
)

// Reasons of the VersionCurrent condition.
const (
	// ReasonCurrent: every node runs the release of spec.image.
	ReasonCurrent = "Current"
	// ReasonUpdatingInPlace: MinIO was asked to update itself.
	ReasonUpdatingInPlace = "UpdatingInPlace"
	// ReasonUpdatedInPlace: every node runs the new release after an
	// in-place update.
	ReasonUpdatedInPlace = "UpdatedInPlace"
	// ReasonRollingUpdate: the StatefulSets got the new image; their pods
	// are replaced by the statefulset controller.
	ReasonRollingUpdate = "RollingUpdate"
	// ReasonUpdateFailed: neither path could be taken.
	ReasonUpdateFailed = "UpdateFailed"
	// ReasonUpdatesPaused: the ObjectStore carries the pause annotation.
	ReasonUpdatesPaused = "UpdatesPaused"
	// ReasonConfigurationMissing: the operator cannot reach the tenant's
	// admin API for lack of credentials or an endpoint.
	ReasonConfigurationMissing = "ConfigurationMissing"
	// ReasonTenantUnreachable: the admin API did not answer.
	ReasonTenantUnreachable = "TenantUnreachable"
	// ReasonEndpointNotAllowed: the admin endpoint (spec.updates.endpoint,
	// or a node endpoint MinIO reports) is outside the ObjectStore's
	// namespace and what the platform allows; nothing was dialled.
	ReasonEndpointNotAllowed = "EndpointNotAllowed"
	// ReasonWaitingForNodes: the StatefulSets run spec.image but not every
	// node reports its release yet (pods starting or restarting).
	ReasonWaitingForNodes = "WaitingForNodes"
	// ReasonWaitingForBinary: the release of spec.image is still being
	// pulled into the store.
	ReasonWaitingForBinary = "WaitingForBinary"
	// ReasonUpdateQueued: an update is due, and waits for one of its
	// namespace's update call slots, or for the fleet's in-place updates
	// in flight to fall under their cap.
	ReasonUpdateQueued = "UpdateQueued"
	// ReasonOutsideWindow: an update is due, and waits for
	// spec.updates.window to open.
	ReasonOutsideWindow = "OutsideWindow"
	// ReasonInvalidWindow: spec.updates.window does not parse or never
	// opens; no update starts.
	ReasonInvalidWindow = "InvalidWindow"
)

// Causes of a fallback to a rolling update, or of a condition that is not
// True, for whoever wires the controller to attach a remedy to (see
// Config.Remedy).
const (
	CauseConfigurationMissing = "ConfigurationMissing"
	CauseTenantUnreachable    = "TenantUnreachable"
	// CauseEndpointNotAllowed: see ReasonEndpointNotAllowed.
	CauseEndpointNotAllowed = "EndpointNotAllowed"
	// CauseOperatorNotTrusted: the tenant's CAs do not verify the upgrade
	// server's certificate for the update URL's host.
	CauseOperatorNotTrusted = "OperatorNotTrusted"
	// CauseInPlaceRefused: MinIO answered the update call with an error
	// (MethodNotAllowed when MINIO_UPDATE=off, a signature it refuses, a
	// binary it cannot write).
	CauseInPlaceRefused = "InPlaceRefused"
	// CauseNodesNotUpdated: nodes still ran the old release when the
	// update's time ran out.
	CauseNodesNotUpdated = "NodesNotUpdated"
	// CauseBinaryUnavailable: the release of spec.image is not in the store.
	CauseBinaryUnavailable = "BinaryUnavailable"
	// CauseDowngrade: MinIO updates in place only to a newer release.
	CauseDowngrade = "Downgrade"
	// CauseMixedPlatforms: the tenant's pods run on Nodes of more than one
	// platform (os/arch); MinIO would push one binary to all of them.
	CauseMixedPlatforms = "MixedPlatforms"
	CauseNodeOffline    = "NodeOffline"
)

// Error is a failure with the cause it is reported under.
type Error struct {
	Cause string
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// newError gives err a cause, unless err already has one: the cause found
// nearest the failure is the more specific (an admin client refused for
// its endpoint stays EndpointNotAllowed when the caller files every admin
// client failure under TenantUnreachable).
func newError(cause string, err error) *Error {
	if inner := causeOf(err); inner != "" {
		cause = inner
	}
	return &Error{Cause: cause, Err: err}
}

func errorf(cause, format string, args ...any) *Error {
	return newError(cause, fmt.Errorf(format, args...))
}

// causeOf returns err's cause, "" for an untyped error.
func causeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Cause
	}
	return ""
}
