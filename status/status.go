// Package status writes the conditions of ObjectStores. Each controller
// applies its own condition by server-side apply under its own field
// manager: conditions are a list keyed by type, so the apiserver merges
// them and no controller can drop or overwrite another's, whatever version
// of the object it read (there is no read-modify-write of the list).
package status

import (
	"context"
	"fmt"
	"strings"
	"time"

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

// Writer applies one controller's condition.
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

// SetCondition applies want to u's status when its status, reason,
// message or observed generation differ from what u carries, keeping the
// transition time while the status stays, and then records an Event on u
// of the reason's severity. It reports whether it wrote.
func (w *Writer) SetCondition(ctx context.Context, u *unstructured.Unstructured, want metav1.Condition) (bool, error) {
	return w.set(ctx, u, want, nil, false)
}

// SetConditionAndBinary is SetCondition for the manager that also owns
// status.binary (nil: none). Both go in one apply, always together: an
// apply without the field would remove what the manager set before.
func (w *Writer) SetConditionAndBinary(ctx context.Context, u *unstructured.Unstructured, want metav1.Condition, binary *v1.BinaryStatus) (bool, error) {
	return w.set(ctx, u, want, binary, true)
}

func (w *Writer) set(ctx context.Context, u *unstructured.Unstructured, want metav1.Condition, binary *v1.BinaryStatus, withBinary bool) (bool, error) {
	want.ObservedGeneration = u.GetGeneration()
	want.Message = BoundMessage(want.Message)
	have, found := Condition(u, want.Type)
	sameBinary := !withBinary || equalBinary(u, binary)
	if found && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message &&
		have.ObservedGeneration == want.ObservedGeneration && sameBinary {
		return false, nil
	}
	now := clock.PassiveClock(clock.RealClock{})
	if w.Clock != nil {
		now = w.Clock
	}
	var prev *metav1.Condition
	if found {
		prev = &have
	}
	want = Next(prev, want, now.Now())
	st := &v1.ObjectStoreStatus{Conditions: []metav1.Condition{want}}
	if withBinary {
		st.Binary = binary
	}
	if err := Apply(ctx, w.Client, w.Manager, u, st); err != nil {
		return false, fmt.Errorf("condition %s: %w", want.Type, err)
	}
	if w.Recorder != nil && (!found || have.Status != want.Status || have.Reason != want.Reason || have.Message != want.Message) {
		w.Recorder.Event(u, string(w.Reasons.Severity(want.Reason)), want.Reason, want.Message)
	}
	return true, nil
}

// Apply applies st, the status fields manager owns, to u's status
// subresource by server-side apply. What manager applied before and st
// leaves out is removed; other managers' fields stay.
func Apply(ctx context.Context, client dynamic.Interface, manager string, u *unstructured.Unstructured, st *v1.ObjectStoreStatus) error {
	return ApplyAt(ctx, client, manager, u, st, "")
}

// ApplyAt is Apply with resourceVersion, when not empty, as a
// precondition: the apiserver answers a conflict (apierrors.IsConflict)
// when the object is no longer at that version.
func ApplyAt(ctx context.Context, client dynamic.Interface, manager string, u *unstructured.Unstructured, st *v1.ObjectStoreStatus, resourceVersion string) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	metadata := map[string]any{"name": u.GetName(), "namespace": u.GetNamespace()}
	if resourceVersion != "" {
		metadata["resourceVersion"] = resourceVersion
	}
	apply := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": v1.Kind, "metadata": metadata, "status": raw,
	}}
	if _, err := client.Resource(v1.Resource).Namespace(u.GetNamespace()).ApplyStatus(ctx, u.GetName(), apply,
		metav1.ApplyOptions{FieldManager: manager, Force: true}); err != nil {
		return fmt.Errorf("apply status of ObjectStore %s/%s: %w", u.GetNamespace(), u.GetName(), err)
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

// Condition returns u's condition of type t. It reads that one entry, so
// a malformed entry elsewhere in the status does not hide it.
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

// equalBinary reports whether u's status.binary is binary (nil: absent).
func equalBinary(u *unstructured.Unstructured, binary *v1.BinaryStatus) bool {
	have, found, _ := unstructured.NestedStringMap(u.Object, "status", "binary")
	if binary == nil {
		return !found
	}
	return found && have["release"] == binary.Release && have["sha256"] == binary.SHA256 &&
		have["platform"] == binary.Platform && have["url"] == binary.URL
}
