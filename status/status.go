// Package status writes the conditions of ObjectStores. Each controller
// applies its own condition by server-side apply under its own field
// manager: conditions are a list keyed by type, so the apiserver merges
// them and no controller can drop or overwrite another's, whatever version
// of the object it read (there is no read-modify-write of the list).
package status

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
)

// Writer applies the status fields one controller owns: its condition
// and, for the controllers that own them, status.binary (the binary
// source) or status.release, status.update, status.updatePhase and status.stopped (the
// updater). It is the one condition writer: every controller's condition
// goes through Write, compared, applied and told in an Event the same way.
type Writer struct {
	Client dynamic.Interface
	// Manager is the field manager: one per controller.
	Manager string
	// Recorder may be nil: no Events.
	Recorder record.EventRecorder
	// Reasons gives each Event its type (reason.Set.Severity): Warning
	// for a reason it does not know.
	Reasons reason.Set
	// Clock stamps transitions; nil is the real clock.
	Clock clock.PassiveClock
}

// Options qualify a Write.
type Options struct {
	// ResourceVersion, when set, is a precondition: the apiserver answers
	// a conflict (apierrors.IsConflict) when the object is no longer at
	// that version.
	ResourceVersion string
	// Always applies want even when it equals have: with ResourceVersion,
	// how a write is made at most once for one version of the object.
	Always bool
}

// SetCondition applies want to u's status when its status, reason,
// message or observed generation differ from what u carries (see Write).
// It reports whether it wrote.
func (w *Writer) SetCondition(ctx context.Context, u *unstructured.Unstructured, want metav1.Condition) (bool, error) {
	store := ObjectStore(u)
	return w.Write(ctx, store, conditionOf(store, want.Type), v1.ObjectStoreStatus{Conditions: []metav1.Condition{want}}, Options{})
}

// SetConditionAndBinary is SetCondition for the manager that also owns
// status.binary (nil: none). Both go in one apply, always together: an
// apply without the field would remove what the manager set before.
func (w *Writer) SetConditionAndBinary(ctx context.Context, u *unstructured.Unstructured, want metav1.Condition, binary *v1.BinaryStatus) (bool, error) {
	store := ObjectStore(u)
	have := conditionOf(store, want.Type)
	have.Binary = store.Status.Binary
	return w.Write(ctx, store, have, v1.ObjectStoreStatus{Conditions: []metav1.Condition{want}, Binary: binary}, Options{})
}

// Write applies want, exactly the fields the manager owns (its one
// condition, the only one in want.Conditions), to store's status when it
// differs from have (the same fields as store carries them), or always
// with opts.Always. The condition gets store's generation as its observed
// generation and, unless the caller stamped one (Next), its transition
// time: kept while the status stays. A change of the condition's status
// or reason is recorded as an Event on store, of the reason's severity;
// a new message under the same reason is not news (a progress count, a
// retried error's wording) and records none. It reports whether it wrote.
func (w *Writer) Write(ctx context.Context, store *v1.ObjectStore, have, want v1.ObjectStoreStatus, opts Options) (bool, error) {
	var prev, cond *metav1.Condition
	if len(have.Conditions) > 0 {
		prev = &have.Conditions[0]
	}
	if len(want.Conditions) > 0 {
		c := want.Conditions[0]
		c.ObservedGeneration = store.Generation
		now := c.LastTransitionTime.Time
		if now.IsZero() {
			now = w.now()
		}
		c = Next(prev, c, now)
		cond = &c
		want.Conditions = []metav1.Condition{c}
	}
	if !opts.Always && equal(have, want) {
		return false, nil
	}
	if err := applyAt(ctx, w.Client, w.Manager, store, &want, opts.ResourceVersion); err != nil {
		if cond != nil {
			return false, fmt.Errorf("condition %s: %w", cond.Type, err)
		}
		return false, err
	}
	if w.Recorder != nil && cond != nil && (prev == nil || prev.Status != cond.Status || prev.Reason != cond.Reason) {
		w.Recorder.Event(reference(store), string(w.Reasons.Severity(cond.Reason)), cond.Reason, cond.Message)
	}
	return true, nil
}

func (w *Writer) now() time.Time {
	if w.Clock != nil {
		return w.Clock.Now()
	}
	return time.Now()
}

// conditionOf is store's condition of type t as the only field of a
// status (none when it has none).
func conditionOf(store *v1.ObjectStore, t string) v1.ObjectStoreStatus {
	if c := meta.FindStatusCondition(store.Status.Conditions, t); c != nil {
		return v1.ObjectStoreStatus{Conditions: []metav1.Condition{*c}}
	}
	return v1.ObjectStoreStatus{}
}

// equal tells whether two projections of one manager's fields are the
// same as far as a write goes: a condition's transition time is not
// compared (Next keeps it while the status stays).
func equal(have, want v1.ObjectStoreStatus) bool {
	if len(have.Conditions) != len(want.Conditions) || have.Release != want.Release || have.UpdatePhase != want.UpdatePhase ||
		have.NodesOn != want.NodesOn || !slices.Equal(have.Nodes, want.Nodes) ||
		(have.Update == nil) != (want.Update == nil) || (have.Binary == nil) != (want.Binary == nil) || (have.Stopped == nil) != (want.Stopped == nil) {
		return false
	}
	if have.Stopped != nil && !have.Stopped.Equal(*want.Stopped) {
		return false
	}
	if have.Update != nil && !have.Update.Equal(*want.Update) {
		return false
	}
	if have.Binary != nil && *have.Binary != *want.Binary {
		return false
	}
	for i, h := range have.Conditions {
		c := want.Conditions[i]
		if h.Type != c.Type || h.Status != c.Status || h.Reason != c.Reason || h.Message != c.Message || h.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}

// ObjectStore is the one way an ObjectStore is read: typed, converted
// from what the informer (or the apiserver) holds. An object that does
// not convert (its spec or status malformed) is its name, namespace and
// generation alone, so a condition saying so can still be written.
func ObjectStore(u *unstructured.Unstructured) *v1.ObjectStore {
	if s, err := v1.FromUnstructured(u); err == nil {
		return s
	}
	return &v1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), Generation: u.GetGeneration(),
		UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}}
}

// reference is what an Event on store names: a typed ObjectStore is not
// a runtime.Object the recorder could reference itself.
func reference(store *v1.ObjectStore) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: v1.GroupVersion.String(), Kind: v1.Kind, Namespace: store.Namespace, Name: store.Name,
		UID: store.UID, ResourceVersion: store.ResourceVersion}
}

// applyAt applies st, the status fields manager owns, to store's status
// subresource by server-side apply, with resourceVersion, when not
// empty, as a precondition. What manager applied before and st leaves
// out is removed; other managers' fields stay.
func applyAt(ctx context.Context, client dynamic.Interface, manager string, store *v1.ObjectStore, st *v1.ObjectStoreStatus, resourceVersion string) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	metadata := map[string]any{"name": store.Name, "namespace": store.Namespace}
	if resourceVersion != "" {
		metadata["resourceVersion"] = resourceVersion
	}
	apply := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": v1.Kind, "metadata": metadata, "status": raw,
	}}
	if _, err := client.Resource(v1.Resource).Namespace(store.Namespace).ApplyStatus(ctx, store.Name, apply,
		metav1.ApplyOptions{FieldManager: manager, Force: true}); err != nil {
		return fmt.Errorf("apply status of ObjectStore %s/%s: %w", store.Namespace, store.Name, err)
	}
	return nil
}

// Next is want as it is written over have (nil: none yet): the
// transition time kept while the status stays and now when it changes,
// as meta.SetStatusCondition keeps it, and the message bounded. Every
// controller's condition goes through it.
func Next(have *metav1.Condition, want metav1.Condition, now time.Time) metav1.Condition {
	want.Message = BoundMessage(want.Message)
	want.LastTransitionTime = metav1.NewTime(now)
	var list []metav1.Condition
	if have != nil {
		list = append(list, *have)
	}
	meta.SetStatusCondition(&list, want)
	return list[0]
}

// MaxMessage is the CRD's bound on a condition's message
// (status.conditions[].message maxLength, the one place it is declared:
// TestMaxMessageIsTheCRDs holds this to it).
const MaxMessage = 32768

// BoundMessage cuts a message to what the CRD admits, on a character
// boundary, and says so: messages quote what came from outside (a
// registry's error, MinIO's answer), and an apply the apiserver refuses
// would leave the condition stale. Bound before comparing with what the
// object carries, so a long message is not written again on every sync.
func BoundMessage(m string) string {
	if len(m) <= MaxMessage {
		return m
	}
	const cut = " [cut: too long]"
	m = strings.ToValidUTF8(m[:MaxMessage-len(cut)], "")
	return m + cut
}

// Condition returns u's condition of type t without converting the whole
// object (ObjectStore): for a scan of every ObjectStore in the informer
// (binsource's readiness), where a conversion each would cost more than
// the answer. It reads that one entry, so a malformed entry elsewhere in
// the status does not hide it.
func Condition(u *unstructured.Unstructured, t string) (metav1.Condition, bool) {
	// No copy: the object is the informer's, and only read here.
	field, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
	list, _ := field.([]any)
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok || m["type"] != t {
			continue
		}
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err != nil {
			return metav1.Condition{}, false
		}
		return c, true
	}
	return metav1.Condition{}, false
}
