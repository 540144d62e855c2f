package mountsecret

import (
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/window"
)

// Reasons of the CertificatesReady condition and of this controller's
// Events.
const (
	// ReasonCertificatesAssembled: the generated Secret holds every
	// referenced certificate and the pods mount it.
	ReasonCertificatesAssembled = "CertificatesAssembled"
	// ReasonInvalidSpec: the ObjectStore's spec does not convert (or its
	// window does not parse).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSecretNotFound: a referenced Secret does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretMalformed: a referenced Secret lacks a key or holds no
	// usable PEM.
	ReasonSecretMalformed = "SecretMalformed"
	// ReasonTooLarge: the generated Secret would exceed what a Secret holds.
	ReasonTooLarge = "TooLarge"
	// ReasonGeneratedSecretConflict: a Secret of the generated name exists
	// that this ObjectStore does not own.
	ReasonGeneratedSecretConflict = "GeneratedSecretConflict"
	// ReasonWriteRefused: the apiserver refused a write.
	ReasonWriteRefused = "WriteRefused"
	// ReasonRestarting is the Event of a restart for new certificates.
	ReasonRestarting = "Restarting"
	// ReasonRestartTimeout is the Event of a restart whose pods were not
	// ready again within the restart timeout.
	ReasonRestartTimeout = "RestartTimeout"
	// ReasonRestartsPaused, ReasonRestartQueued and ReasonOutsideWindow:
	// a restart waits (restarts.go).
	ReasonRestartsPaused = "RestartsPaused"
	ReasonRestartQueued  = "RestartQueued"
	ReasonOutsideWindow  = window.ReasonOutside
	// ReasonInvalidWindow: spec.updates.window does not parse or never
	// opens; restarts wait until it is fixed.
	ReasonInvalidWindow = window.ReasonInvalid
)

// Reasons is every reason this controller reports, with its Event
// severity and what the user can do about it.
func Reasons() []reason.Reason {
	return append([]reason.Reason{
		{Name: ReasonCertificatesAssembled, Severity: reason.Normal},
		{Name: ReasonInvalidSpec, Severity: reason.Warning},
		{Name: ReasonSecretNotFound, Severity: reason.Warning, Remedy: "create the Secret in the ObjectStore's namespace, or fix the reference"},
		{Name: ReasonSecretMalformed, Severity: reason.Warning, Remedy: "fix the Secret: the message names the key and the problem"},
		{Name: ReasonTooLarge, Severity: reason.Warning, Remedy: "reference fewer or smaller CA bundles: a Secret holds at most 1 MiB"},
		{Name: ReasonGeneratedSecretConflict, Severity: reason.Warning, Remedy: "rename or delete the Secret: the operator owns <name>-generated"},
		{Name: ReasonWriteRefused, Severity: reason.Warning, Remedy: "the apiserver's answer is above: an admission webhook, a quota or missing RBAC"},
		{Name: ReasonRestarting, Severity: reason.Normal},
		{Name: ReasonRestartTimeout, Severity: reason.Warning, Remedy: "see why the tenant's pods are not ready; {restart-timeout} bounds how long one tenant holds a restart slot"},
		{Name: ReasonRestartsPaused, Severity: reason.Normal},
		{Name: ReasonRestartQueued, Severity: reason.Normal},
		{Name: controller.ReasonInternalError, Severity: reason.Warning},
	}, window.Reasons()...)
}
