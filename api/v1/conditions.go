package v1

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
)

// ConditionBinaryAvailable tells whether the ObjectStore's release is in
// the upgrade server's store.
const ConditionBinaryAvailable = "BinaryAvailable"

// SetCondition writes one status condition of u through the status
// subresource, only when its status, reason, message or observed
// generation differ from what u carries, and then records an Event on u
// (Warning unless the condition is True; recorder may be nil). It reports
// whether it wrote. Two controllers share the status: on a conflict it
// reads the latest version and tries again.
func SetCondition(ctx context.Context, client dynamic.Interface, recorder record.EventRecorder, u *unstructured.Unstructured, want metav1.Condition) (bool, error) {
	var wrote bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		wrote, err = setCondition(ctx, client, u, want)
		if apierrors.IsConflict(err) {
			latest, getErr := client.Resource(Resource).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
			if getErr != nil {
				return getErr
			}
			u = latest
		}
		return err
	})
	if wrote && recorder != nil {
		eventType := corev1.EventTypeNormal
		if want.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		recorder.Event(u, eventType, want.Reason, want.Message)
	}
	return wrote, err
}

func setCondition(ctx context.Context, client dynamic.Interface, u *unstructured.Unstructured, want metav1.Condition) (bool, error) {
	store, err := FromUnstructured(u)
	if err != nil {
		store = &ObjectStore{}
	}
	want.ObservedGeneration = u.GetGeneration()
	want.LastTransitionTime = metav1.NewTime(time.Now())
	conditions := append([]metav1.Condition(nil), store.Status.Conditions...)
	if cur := meta.FindStatusCondition(conditions, want.Type); cur != nil &&
		cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message && cur.ObservedGeneration == want.ObservedGeneration {
		return false, nil
	}
	meta.SetStatusCondition(&conditions, want)
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ObjectStoreStatus{Conditions: conditions})
	if err != nil {
		return false, fmt.Errorf("encode status: %w", err)
	}
	updated := u.DeepCopy()
	if err := unstructured.SetNestedField(updated.Object, raw["conditions"], "status", "conditions"); err != nil {
		return false, fmt.Errorf("set status: %w", err)
	}
	if _, err := client.Resource(Resource).Namespace(u.GetNamespace()).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		// %w keeps IsConflict working for the retry.
		return false, fmt.Errorf("update status of ObjectStore %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return true, nil
}
