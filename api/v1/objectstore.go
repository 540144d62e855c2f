// Package v1 holds the aistor.min.io/v1 ObjectStore API as far as this
// operator reads it. ObjectStores are read through the dynamic client and
// converted with FromUnstructured, so no generated clientset is needed;
// the CRD declares every spec field, so one not named here is refused.
package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Group, version and resource of ObjectStores.
var (
	GroupVersion = schema.GroupVersion{Group: "aistor.min.io", Version: "v1"}
	Resource     = GroupVersion.WithResource("objectstores")
)

// Kind is the ObjectStore kind.
const Kind = "ObjectStore"

// ObjectStoreLabel on a StatefulSet names the ObjectStore whose pods it
// runs (its value is ObjectStoreLabelValue of the name); the mount-secret
// controller rolls those pods and the updater sets their image.
const ObjectStoreLabel = "aistor.min.io/objectstore"

// ObjectStoreNameAnnotation carries the ObjectStore's full name where the
// label value had to be shortened.
const ObjectStoreNameAnnotation = "aistor.min.io/objectstore-name"

// ObjectStoreLabelValue is the ObjectStoreLabel value for an ObjectStore
// name: the name itself when it fits a label value (63 characters), else
// its first 52 characters and 10 hex digits of its SHA-256, so that two long
// names never share a value.
func ObjectStoreLabelValue(name string) string {
	if len(name) <= validation.LabelValueMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:52], "-.") + "-" + hex.EncodeToString(sum[:])[:10]
}

// StatefulSetSelector selects the StatefulSets that run the pods of the
// ObjectStore name (ObjectStoreLabel).
func StatefulSetSelector(name string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{ObjectStoreLabel: ObjectStoreLabelValue(name)})
}

// ConditionCertificatesReady tells whether the generated mount Secret
// holds every referenced certificate.
const ConditionCertificatesReady = "CertificatesReady"

// ConditionPodsCurrent tells whether every pod the operator had to
// replace runs the current template (package rollout).
const ConditionPodsCurrent = "PodsCurrent"

// Reasons of PodsCurrent=False under which the rollout has no pod down
// for it and takes none down: it waits for MinIO's consent, for an
// in-place update, or is stopped. The updater reads them: an update may
// start then, and the rollout waits for it (docs/restarts.md).
const (
	PodsWaitingForQuorum = "WaitingForQuorum"
	PodsWaitingForUpdate = "WaitingForUpdate"
	PodsTimedOut         = "PodTimeout"
	PodsTooMany          = "TooManyPods"
)

// RolloutIdle tells whether the PodsCurrent condition c says the rollout
// is not replacing a pod now (one of the reasons above).
func RolloutIdle(c *metav1.Condition) bool {
	if c == nil || c.Status != metav1.ConditionFalse {
		return false
	}
	switch c.Reason {
	case PodsWaitingForQuorum, PodsWaitingForUpdate, PodsTimedOut, PodsTooMany:
		return true
	}
	return false
}

// ObjectStoreOf names the ObjectStore a labelled object (a StatefulSet)
// belongs to: the annotation holds a name too long for the label.
func ObjectStoreOf(m metav1.Object) string {
	if name := m.GetAnnotations()[ObjectStoreNameAnnotation]; name != "" {
		return name
	}
	return m.GetLabels()[ObjectStoreLabel]
}

// ConditionVersionCurrent tells whether every MinIO node runs the release
// of spec.image.
const ConditionVersionCurrent = "VersionCurrent"

// UpdatesPausedAnnotation set to "true" on an ObjectStore keeps the
// operator from starting an update of it; one in flight finishes.
const UpdatesPausedAnnotation = "aistor.min.io/updates-paused"

// RestartsPausedAnnotation set to "true" on an ObjectStore holds the
// restarts certificate changes need: its generated Secret and its pods
// stay as they are until it is removed.
const RestartsPausedAnnotation = "aistor.min.io/restarts-paused"

// ResumeUpdatesAnnotation set to a release on an ObjectStore lets that
// ObjectStore be updated to the release although the fleet's updates to
// it are halted (docs/updates.md, the failure budget). It resumes no
// other ObjectStore.
const ResumeUpdatesAnnotation = "aistor.min.io/resume-updates"

// ConfigEnvKey is the key of the configuration Secret that holds MinIO's
// environment as `export NAME=value` lines.
const ConfigEnvKey = "config.env"

// ObjectStore is a MinIO object store (tenant).
type ObjectStore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ObjectStoreSpec   `json:"spec,omitempty"`
	Status            ObjectStoreStatus `json:"status,omitempty"`
}

// ObjectStoreSpec is the spec. The CRD declares and validates each of
// these fields (its description names them) and refuses any other, so a
// typo (spec.update.window) is an error, not a window silently ignored.
type ObjectStoreSpec struct {
	// Image is the MinIO image the pods run; its binary is served to them.
	Image string `json:"image,omitempty"`
	// ImagePullSecrets authenticate pulls of Image, as in a PodSpec.
	ImagePullSecrets []SecretRef  `json:"imagePullSecrets,omitempty"`
	Certificates     Certificates `json:"certificates,omitempty"`
	// Configuration names the Secret (key config.env) with MinIO's root
	// credentials; the operator needs it to ask MinIO to update.
	Configuration *SecretRef `json:"configuration,omitempty"`
	Updates       Updates    `json:"updates,omitempty"`
	Restarts      *Restarts  `json:"restarts,omitempty"`
}

// Restarts says how the operator replaces the pods when it must: one
// pod at a time by default, each serving pod only when MinIO agrees one
// more node may go down (package rollout).
type Restarts struct {
	// MaxUnavailable is how many pods may be down at once (0: the
	// operator's default).
	MaxUnavailable int32 `json:"maxUnavailable,omitempty"`
	// PodTimeout is how long a replaced pod has to become Ready, as Go
	// writes durations ("10m"); "": the operator's default.
	PodTimeout string `json:"podTimeout,omitempty"`
}

// Updates says how the operator reaches the tenant for in-place updates.
type Updates struct {
	// Endpoint is the MinIO admin API's URL; empty means
	// https://<name>-hl.<namespace>.svc.<cluster-domain>:9000. Its host
	// must be a Service of the ObjectStore's namespace, or a pod under a
	// headless one, unless the platform allows more (docs/updates.md).
	Endpoint string `json:"endpoint,omitempty"`
	// Window, when set, holds the start of this tenant's updates to a
	// maintenance window (docs/updates.md); an update in flight when it
	// closes finishes.
	Window *UpdateWindow `json:"window,omitempty"`
	// Fallback is what follows an in-place update that cannot be made or
	// failed: FallbackRolling (the StatefulSets get the image and their
	// pods are replaced) or FallbackNone (the update stops with a
	// condition and its remedy; no StatefulSet is changed). Empty: the
	// operator's default (docs/configuration.md).
	Fallback string `json:"fallback,omitempty"`
}

// The fallbacks spec.updates.fallback names.
const (
	FallbackRolling = "Rolling"
	FallbackNone    = "None"
)

// UpdateWindow is a recurring maintenance window, as Strimzi's
// maintenanceTimeWindows: it opens whenever Schedule fires and stays open
// for Duration.
type UpdateWindow struct {
	// Schedule is a five-field cron schedule or a descriptor (@daily),
	// read in UTC: "0 2 * * 6" opens Saturdays at 02:00 UTC.
	Schedule string `json:"schedule"`
	// Duration is how long the window stays open, as Go writes durations
	// ("2h", "90m"), from 1m to 168h.
	Duration string `json:"duration"`
}

// Certificates lists Secrets in the ObjectStore's namespace.
type Certificates struct {
	// Server key pairs; the first is MinIO's default certificate.
	Server []SecretRef `json:"server,omitempty"`
	// Client key pairs MinIO presents to other services.
	Client []SecretRef `json:"client,omitempty"`
	// TrustedCAs are CA certificates MinIO trusts.
	TrustedCAs []SecretRef `json:"trustedCAs,omitempty"`
}

// SecretRef names a Secret in the same namespace.
type SecretRef struct {
	Name string `json:"name"`
}

// ObjectStoreStatus is what the operator reports.
type ObjectStoreStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Release is the MinIO release the nodes run, as they last reported it
	// (the oldest one while they differ).
	Release string `json:"release,omitempty"`
	// NodesOn says how many nodes run which release, for
	// `kubectl get objectstore -o wide`: "3/4 on RELEASE.…" (the release
	// most of them run), "4/4 on …" when every one does.
	NodesOn string `json:"nodesOn,omitempty"`
	// Nodes are the nodes with the release each runs, as MinIO's server
	// info last said (sorted by endpoint, the first MaxListedNodes).
	Nodes []NodeRelease `json:"nodes,omitempty"`
	// Update is the in-place update in flight, recorded before MinIO is
	// called so that a restarted or new leader never calls twice.
	Update *UpdateStatus `json:"update,omitempty"`
	// Binary is what spec.image resolved to, written by the binary source
	// with its BinaryAvailable condition.
	Binary *BinaryStatus `json:"binary,omitempty"`
	// UpdatePhase is the update's state in a word or two, for
	// `kubectl get objectstore`: "Current", "Updating 2/4" (nodes on the
	// new release / nodes), "Queued", "Halted", "Window 02:00Z" (waiting
	// for the window that opens then), "Rolling", "Paused", "Failed",
	// "Waiting", "Unreachable", "Verifying" (MinIO's dry run is under
	// way), "Stopped" (a failed update not rolled). VersionCurrent says
	// the rest.
	UpdatePhase string `json:"updatePhase,omitempty"`
	// Stopped is an update that ended without the release and without a
	// rolling update (a dry run the nodes did not pass, or a failure with
	// spec.updates.fallback None): no update to the same image starts
	// again before its RetryAt, unless the spec changes.
	Stopped *StoppedUpdate `json:"stopped,omitempty"`
}

// MaxListedNodes bounds status.nodes: a tenant's hundreds of nodes are
// counted in NodesOn, not each listed.
const MaxListedNodes = 64

// NodeRelease is one MinIO node and the release it runs ("" while it is
// offline).
type NodeRelease struct {
	Endpoint string `json:"endpoint"`
	Release  string `json:"release,omitempty"`
}

// StoppedUpdate is an update the operator stopped, and when it tries
// again.
type StoppedUpdate struct {
	Release string `json:"release"`
	// Image is the spec.image the update was for.
	Image string `json:"image,omitempty"`
	// Generation is the ObjectStore's generation when it stopped: a spec
	// change (a fixed fallback, a new image) tries again at once.
	Generation int64 `json:"generation,omitempty"`
	// Reason is VersionCurrent's reason when it stopped.
	Reason  string      `json:"reason"`
	At      metav1.Time `json:"at"`
	RetryAt metav1.Time `json:"retryAt"`
}

// Equal reports whether s and o record the same stop (times by their
// instant).
func (s StoppedUpdate) Equal(o StoppedUpdate) bool {
	return s.Release == o.Release && s.Image == o.Image && s.Generation == o.Generation && s.Reason == o.Reason &&
		s.At.Equal(&o.At) && s.RetryAt.Equal(&o.RetryAt)
}

// BinaryStatus names the ObjectStore's own binary by its bytes.
type BinaryStatus struct {
	// Image is the spec.image this binary was resolved from: a reader
	// (the in-place updater) knows the status is about the image the spec
	// names now, not the one before an edit.
	Image   string `json:"image,omitempty"`
	Release string `json:"release,omitempty"`
	// SHA256 is the lower-case hex digest of the binary.
	SHA256 string `json:"sha256,omitempty"`
	// Platform is <os>-<arch>.
	Platform string `json:"platform,omitempty"`
	// URL is the .sha256sum URL MinIO is given:
	// <update URL>/sha256/<hex>/minio.<RELEASE>.sha256sum, or for a binary
	// whose image needed the ObjectStore's pull credentials
	// <update URL>/sha256/<hex>/<component>/minio.<RELEASE>.sha256sum, with
	// a component only this ObjectStore is given. Every replica serves it
	// with exactly these bytes, or 404.
	URL string `json:"url,omitempty"`
}

// UpdateStatus is an in-place update the operator started.
type UpdateStatus struct {
	Release string `json:"release"`
	// Image is the spec.image the update is for: if spec.image changes
	// while it is in flight, the update is over.
	Image   string      `json:"image,omitempty"`
	Started metav1.Time `json:"started"`
	// DryRuns counts the dry runs (ServerUpdateV2 with dry-run=true:
	// every node fetches and verifies the binary, nothing restarts) made
	// for Release. The real call follows only a dry run every node passed.
	DryRuns int `json:"dryRuns,omitempty"`
	// Calls counts the real ServerUpdateV2 calls made for Release; 0
	// while the dry run is under way.
	Calls int `json:"calls"`
	// LastCall is when the last call was made.
	LastCall metav1.Time `json:"lastCall"`
	// RetryAt is set when the operator's own upgrade server refused or
	// dropped MinIO's download (its limits, its shutdown): not the
	// tenant's failure, so nothing is counted against the release; the
	// call is made again at this time, within the update's timeout.
	RetryAt *metav1.Time `json:"retryAt,omitempty"`
	// Refusals counts those refusals; each pause doubles.
	Refusals int `json:"refusals,omitempty"`
}

// Equal reports whether u and o record the same update (RetryAt by its
// time, not its pointer).
func (u UpdateStatus) Equal(o UpdateStatus) bool {
	ur, or := u.RetryAt, o.RetryAt
	u.RetryAt, o.RetryAt = nil, nil
	return u == o && (ur == nil) == (or == nil) && (ur == nil || ur.Equal(or))
}

// FromUnstructured converts what the dynamic client returns.
func FromUnstructured(u *unstructured.Unstructured) (*ObjectStore, error) {
	var os ObjectStore
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &os); err != nil {
		return nil, fmt.Errorf("ObjectStore %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &os, nil
}

// ReferencedSecrets returns every Secret name the spec references, once each.
func (o *ObjectStore) ReferencedSecrets() []string {
	seen := map[string]bool{}
	var out []string
	for _, list := range [][]SecretRef{o.Spec.Certificates.Server, o.Spec.Certificates.Client, o.Spec.Certificates.TrustedCAs} {
		for _, r := range list {
			if !seen[r.Name] {
				seen[r.Name] = true
				out = append(out, r.Name)
			}
		}
	}
	return out
}

// SecretsRead returns every Secret the operator reads for the ObjectStore,
// once each: the certificates (ReferencedSecrets), the configuration, the
// pull Secrets and the generated Secret. The Secret cache keeps the data
// of these alone (secretcache.Reader.Track).
func (o *ObjectStore) SecretsRead() []string {
	out := o.ReferencedSecrets()
	seen := map[string]bool{}
	for _, name := range out {
		seen[name] = true
	}
	names := []string{GeneratedSecretName(o.Name)}
	if o.Spec.Configuration != nil {
		names = append(names, o.Spec.Configuration.Name)
	}
	for _, r := range o.Spec.ImagePullSecrets {
		names = append(names, r.Name)
	}
	for _, name := range names {
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// GeneratedSecretName is the mount Secret of the ObjectStore called name.
func GeneratedSecretName(name string) string { return name + "-generated" }

// SecretIndex returns an informer index function that files an ObjectStore
// under "<namespace>/<secret>" for every Secret name secrets returns, so a
// Secret change finds the stores that use it without a scan. An object that
// does not convert is filed nowhere; the controllers report it when they
// sync it.
func SecretIndex(secrets func(*ObjectStore) []string) func(obj any) ([]string, error) {
	return func(obj any) ([]string, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, nil
		}
		store, err := FromUnstructured(u)
		if err != nil {
			return nil, nil
		}
		names := secrets(store)
		keys := make([]string, 0, len(names))
		for _, name := range names {
			keys = append(keys, store.Namespace+"/"+name)
		}
		return keys, nil
	}
}

// RolloutAnnotation on a StatefulSet says the operator replaces its pods
// itself (package rollout) until every one runs the current template. Its
// value is the rollingUpdate.partition the tenant had before ("" for
// none), given back when the rollout ends, after "all," when the pods are
// replaced together (RolloutOf).
const RolloutAnnotation = "aistor.min.io/rollout"

// rolloutAllAtOnce prefixes the rollout annotation's value when the new
// template runs another binary: MinIO refuses a node whose binary differs
// from its peers' (it compares their checksums when it starts), so one
// node at a time would never rejoin; the pods go together, as
// `mc admin update` restarts every server at once.
const rolloutAllAtOnce = "all"

// RolloutOf reads a StatefulSet's rollout annotation: whether it is held,
// the partition to give back (as written: the reader parses it) and
// whether its pods are replaced together.
func RolloutOf(s *appsv1.StatefulSet) (held bool, restore string, allAtOnce bool) {
	v, held := s.Annotations[RolloutAnnotation]
	if v == rolloutAllAtOnce {
		return held, "", true
	}
	if rest, ok := strings.CutPrefix(v, rolloutAllAtOnce+","); ok {
		return held, rest, true
	}
	return held, v, false
}

// HoldRollout is what a writer of a StatefulSet's pod template adds to
// the same strategic merge patch so that the operator's rollout, not the
// statefulset controller, replaces the pods: the rollout annotation and,
// under RollingUpdate, the partition held at the replicas. A StatefulSet
// held already keeps the partition to give back that it recorded then.
// allAtOnce (a new binary) is kept once set, until the rollout ends.
func HoldRollout(s *appsv1.StatefulSet, allAtOnce bool) (annotations map[string]string, spec map[string]any) {
	held, restore, wasAll := RolloutOf(s)
	if !held {
		restore = ""
		if p := s.Spec.UpdateStrategy.RollingUpdate; p != nil && p.Partition != nil {
			restore = strconv.Itoa(int(*p.Partition))
		}
	}
	value := restore
	if allAtOnce || wasAll {
		value = rolloutAllAtOnce
		if restore != "" {
			value += "," + restore
		}
	}
	annotations = map[string]string{RolloutAnnotation: value}
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return annotations, nil
	}
	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	return annotations, map[string]any{"updateStrategy": map[string]any{
		"rollingUpdate": map[string]any{"partition": replicas},
	}}
}
