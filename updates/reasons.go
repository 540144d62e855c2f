package updates

import (
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/window"
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
	// unit's (namespace's, by default) update call slots, or for the
	// fleet's in-place updates in flight to fall under their cap.
	ReasonUpdateQueued = "UpdateQueued"
	// ReasonWaitingForPods: an update is due, and waits for the rollout
	// that replaces the tenant's pods (a certificate restart; PodsCurrent)
	// to end: a pod replaced during an in-place update would come back on
	// the image's binary beside nodes updated away from it.
	ReasonWaitingForPods = "WaitingForPods"
	// ReasonOutsideWindow: an update is due, and waits for
	// spec.updates.window to open.
	ReasonOutsideWindow = window.ReasonOutside
	// ReasonInvalidWindow: spec.updates.window does not parse or never
	// opens; no update starts.
	ReasonInvalidWindow = window.ReasonInvalid
	// ReasonDryRunFailed: MinIO's dry run of the release (every node
	// fetches and verifies the binary, nothing restarts) did not pass on
	// every node; no real call was made and nothing is rolled. Its cause
	// says whether it counts against the release (CauseDryRunFailed) or
	// was MinIO's own hiccup (CauseBinaryDamagedByMinIO).
	ReasonDryRunFailed = "DryRunFailed"
	// ReasonFallbackDisabled: the in-place update cannot be made or
	// failed, and spec.updates.fallback (or the operator's default) is
	// None: no StatefulSet is changed. Its cause is what would have
	// rolled the tenant.
	ReasonFallbackDisabled = "FallbackDisabled"
)

// ReasonImageRemoved is logged, never set: an update in flight ended
// because spec.image was removed.
const ReasonImageRemoved = "ImageRemoved"

// Causes of a fallback to a rolling update, or of a condition that is not
// True; each has its remedy in Reasons.
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
	// CauseDownloadRefused: the operator's own upgrade server refused or
	// dropped MinIO's download of the release (its limits, its shutdown);
	// not the tenant's failure: the call is made again, nothing is rolled
	// or counted against the release. It is the condition's reason too.
	CauseDownloadRefused = "DownloadRefused"
	// CauseDryRunFailed: a node refused the release's binary in the dry
	// run (its signature, its checksum, a download of its own) or MinIO
	// refused the dry run itself; counted against the release's failure
	// budget like a failed update, never rolled.
	CauseDryRunFailed = ReasonDryRunFailed
	// CauseBinaryDamagedByMinIO: MinIO damaged the binary it pushed to
	// some nodes in every dry run the update may make ("Updated file has
	// wrong checksum", "magic number mismatch": its known bug right after
	// a start); MinIO's hiccup, not the release's failure: not counted,
	// tried again later.
	CauseBinaryDamagedByMinIO = "BinaryDamagedByMinIO"
)

// Reasons is every reason and cause this package reports, with its Event
// severity and what the user can do about it.
func Reasons() []reason.Reason {
	return append([]reason.Reason{
		{Name: ReasonCurrent, Severity: reason.Normal},
		{Name: ReasonUpdatingInPlace, Severity: reason.Normal},
		{Name: ReasonUpdatedInPlace, Severity: reason.Normal},
		{Name: ReasonRollingUpdate, Severity: reason.Warning},
		{Name: ReasonUpdateFailed, Severity: reason.Warning},
		{Name: ReasonUpdatesPaused, Severity: reason.Warning},
		{Name: ReasonWaitingForNodes, Severity: reason.Warning},
		{Name: ReasonWaitingForBinary, Severity: reason.Normal},
		{Name: ReasonUpdateQueued, Severity: reason.Warning},
		{Name: ReasonWaitingForPods, Severity: reason.Normal},
		{Name: ReasonImageRemoved, Severity: reason.Normal},
		{Name: ReasonUpdatesHalted, Severity: reason.Warning,
			Remedy: "fix the release or the tenants named, then delete the Lease object-store-operator-update-halts in the operator's namespace to resume the fleet, or annotate one ObjectStore aistor.min.io/resume-updates=<release> to let it alone proceed"},
		{Name: ReasonConfigurationMissing, Severity: reason.Warning,
			Remedy: "set spec.configuration.name to the Secret whose config.env exports MINIO_ROOT_USER and MINIO_ROOT_PASSWORD (and spec.updates.endpoint if MinIO is not at https://<name>-hl.<namespace>.svc:9000)"},
		{Name: ReasonEndpointNotAllowed, Severity: reason.Warning,
			Remedy: "point spec.updates.endpoint at a Service of the ObjectStore's own namespace (https://<service>.<namespace>.svc:9000, or leave it empty for https://<name>-hl.<namespace>.svc.<cluster domain>:9000) " +
				"that leads to the namespace's own MinIO Pods: not an ExternalName Service, nor EndpointSlices written by hand to other addresses; " +
				"to reach MinIO elsewhere, the platform adds the host (a glob such as *.minio.example.com) or its network (a CIDR) to {allowed-update-endpoints}"},
		{Name: ReasonTenantUnreachable, Severity: reason.Warning,
			Remedy: "check that MinIO's admin API answers at the endpoint and that its certificate is signed by a CA in the ObjectStore's <name>-generated Secret"},
		{Name: CauseOperatorNotTrusted, Severity: reason.Warning,
			Remedy: "the tenant must trust the upgrade server: mount the <name>-generated Secret's CAs.operator.crt into MinIO's certs/CAs and restart the pods, or give the operator a certificate ({custom-tls-secret-name} with ca.crt) for the host in {update-url}"},
		{Name: CauseInPlaceRefused, Severity: reason.Warning,
			Remedy: "MinIO's own error is above: MethodNotAllowed means MINIO_UPDATE=off on the tenant; a signature error means MINIO_UPDATE_MINISIGN_PUBKEY on the tenant does not match the key the binary is signed with; \"permission denied\" means the binary's directory is read-only in the image"},
		{Name: CauseNodesNotUpdated, Severity: reason.Warning,
			Remedy: "check the nodes' logs; {update-timeout} bounds how long the operator waits"},
		{Name: CauseBinaryUnavailable, Severity: reason.Warning,
			Remedy: "see the ObjectStore's BinaryAvailable condition for why and what to do"},
		{Name: CauseDowngrade, Severity: reason.Warning},
		{Name: CauseMixedPlatforms, Severity: reason.Warning,
			Remedy: "to have it updated in place, run every pool of the tenant on one platform (a nodeSelector on kubernetes.io/arch in every pool)"},
		{Name: CauseDownloadRefused, Severity: reason.Warning,
			Remedy: "nothing to do on the tenant: the update is called again shortly. If it keeps happening, the operator's upgrade server is at its limits ({max-downloads}, {max-downloads-per-client}, {max-connections-per-client}) or restarting; see objectstore_operator_upgrade_downloads_rejected_total"},
		{Name: ReasonDryRunFailed, Severity: reason.Warning,
			Remedy: "MinIO's own words are above, per node: a signature error means MINIO_UPDATE_MINISIGN_PUBKEY on the tenant does not match the key the binary is signed with (or the release is signed with a key it should not be); a checksum error on every node means the binary itself is bad. Fix the tenant's key (and restart its pods) or the image; the operator tries again at the time above, or at once when the spec changes"},
		{Name: CauseBinaryDamagedByMinIO, Severity: reason.Warning,
			Remedy: "nothing on the tenant: MinIO damaged the binary on its way to some nodes (its known bug right after a start); nothing was restarted or counted against the release, and the operator tries again at the time above"},
		{Name: ReasonFallbackDisabled, Severity: reason.Warning,
			Remedy: "spec.updates.fallback is None (or the operator's {update-fallback}): fix the cause named above for the update to go in place, or set spec.updates.fallback: Rolling to have the StatefulSets rolled"},
		{Name: CauseNodeOffline, Severity: reason.Warning,
			Remedy: "bring the node back; the update starts when every node is online"},
		{Name: controller.ReasonInternalError, Severity: reason.Warning},
	}, window.Reasons()...)
}
