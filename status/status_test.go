package status

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

func store(conditions ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "aistor.min.io/v1", "kind": "ObjectStore",
		"metadata": map[string]any{"name": "s", "namespace": "t", "generation": int64(2)},
		"status":   map[string]any{"conditions": conditions},
	}}
}

// writer returns a Writer whose applies are captured, not sent.
func writer(t *testing.T) (*Writer, *[]map[string]any, *record.FakeRecorder) {
	client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	var applied []map[string]any
	client.PrependReactor("patch", "objectstores", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		require.Equal(t, types.ApplyPatchType, p.GetPatchType())
		require.Equal(t, "status", p.GetSubresource())
		var obj map[string]any
		require.NoError(t, json.Unmarshal(p.GetPatch(), &obj))
		applied = append(applied, obj)
		return true, &unstructured.Unstructured{Object: obj}, nil
	})
	rec := record.NewFakeRecorder(10)
	return &Writer{Client: client, Manager: "m", Recorder: rec, Clock: clocktesting.NewFakePassiveClock(time.Unix(2000, 0)), Reasons: reason.Set{"New": {Name: "New", Severity: reason.Normal}}}, &applied, rec
}

func TestSetConditionAppliesOnlyItsOwnConditionWhenItChanges(t *testing.T) {
	w, applied, rec := writer(t)
	other := map[string]any{"type": "BinaryAvailable", "status": "True", "reason": "Available", "message": "m",
		"lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": int64(2)}
	mine := map[string]any{"type": "CertificatesReady", "status": "True", "reason": "Old", "message": "old",
		"lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": int64(2)}
	u := store(other, mine)

	wrote, err := w.SetCondition(context.Background(), u, metav1.Condition{Type: "CertificatesReady", Status: metav1.ConditionTrue, Reason: "Old", Message: "old"})
	require.NoError(t, err)
	assert.False(t, wrote, "same condition: nothing written")
	assert.Empty(t, *applied)

	wrote, err = w.SetCondition(context.Background(), u, metav1.Condition{Type: "CertificatesReady", Status: metav1.ConditionTrue, Reason: "New", Message: "new"})
	require.NoError(t, err)
	assert.True(t, wrote)
	require.Len(t, *applied, 1)
	conds, _, _ := unstructured.NestedSlice((*applied)[0], "status", "conditions")
	require.Len(t, conds, 1, "only this writer's condition is applied; the other controller's is the apiserver's to keep")
	c := conds[0].(map[string]any)
	assert.Equal(t, "New", c["reason"])
	assert.Equal(t, "2026-01-01T00:00:00Z", c["lastTransitionTime"], "the status stayed True: the transition time stays")
	assert.EqualValues(t, 2, c["observedGeneration"])
	assert.Equal(t, "Normal New new", <-rec.Events)

	_, err = w.SetCondition(context.Background(), u, metav1.Condition{Type: "CertificatesReady", Status: metav1.ConditionFalse, Reason: "Broken", Message: "why"})
	require.NoError(t, err)
	conds, _, _ = unstructured.NestedSlice((*applied)[1], "status", "conditions")
	assert.Equal(t, time.Unix(2000, 0).UTC().Format(time.RFC3339), conds[0].(map[string]any)["lastTransitionTime"], "a new status is a transition")
	assert.Equal(t, "Warning Broken why", <-rec.Events, "a reason the Set does not know is a Warning")
}

func TestConditionIgnoresAMalformedSibling(t *testing.T) {
	u := store("not a map", map[string]any{"type": "Other", "status": int64(42)},
		map[string]any{"type": "CertificatesReady", "status": "False", "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"})
	c, ok := Condition(u, "CertificatesReady")
	require.True(t, ok)
	assert.Equal(t, "R", c.Reason)
	_, ok = Condition(u, "Missing")
	assert.False(t, ok)
}

func TestAMessageFromOutsideIsBoundedBeforeItIsCompared(t *testing.T) {
	w, applied, _ := writer(t)
	long := strings.Repeat("é", MaxMessage) // twice the bound in bytes
	u := store()
	wrote, err := w.SetCondition(context.Background(), u, metav1.Condition{Type: "BinaryAvailable", Status: metav1.ConditionFalse, Reason: "PullFailed", Message: long})
	require.NoError(t, err)
	require.True(t, wrote)
	conds, _, _ := unstructured.NestedSlice((*applied)[0], "status", "conditions")
	msg := conds[0].(map[string]any)["message"].(string)
	assert.LessOrEqual(t, len(msg), MaxMessage, "what the CRD admits")
	assert.True(t, utf8.ValidString(msg))
	assert.True(t, strings.HasSuffix(msg, "[cut: too long]"))

	// The object now carries the bounded message: the same long message
	// again is no change.
	u = store(conds[0])
	wrote, err = w.SetCondition(context.Background(), u, metav1.Condition{Type: "BinaryAvailable", Status: metav1.ConditionFalse, Reason: "PullFailed", Message: long})
	require.NoError(t, err)
	assert.False(t, wrote)
}

// TestWriteComparesEveryFieldItsManagerOwns: a manager's fields besides
// its condition (the updater's status.update, the binary source's
// status.binary) are written when they change, and only then; a new
// message under the same reason and status is written without an Event.
func TestWriteComparesEveryFieldItsManagerOwns(t *testing.T) {
	w, applied, rec := writer(t)
	cond := metav1.Condition{Type: "VersionCurrent", Status: metav1.ConditionFalse, Reason: "New", Message: "1 call",
		ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(time.Unix(1000, 0))}
	s := &v1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "t", Generation: 2}}
	have := v1.ObjectStoreStatus{Release: "r", Update: &v1.UpdateStatus{Release: "x", Calls: 1}, Conditions: []metav1.Condition{cond}}
	want := have
	want.Update = &v1.UpdateStatus{Release: "x", Calls: 1}
	wrote, err := w.Write(t.Context(), s, have, want, Options{})
	require.NoError(t, err)
	assert.False(t, wrote, "the same fields")

	want.Update = &v1.UpdateStatus{Release: "x", Calls: 2}
	wrote, err = w.Write(t.Context(), s, have, want, Options{})
	require.NoError(t, err)
	assert.True(t, wrote, "a second call is a change to record")
	assert.Empty(t, rec.Events, "the condition did not change")

	want = have
	want.Conditions = []metav1.Condition{cond}
	want.Conditions[0].Message = "2 calls"
	wrote, err = w.Write(t.Context(), s, have, want, Options{})
	require.NoError(t, err)
	assert.True(t, wrote)
	assert.Empty(t, rec.Events, "a new message under the same reason is no Event")

	wrote, err = w.Write(t.Context(), s, have, have, Options{ResourceVersion: "7", Always: true})
	require.NoError(t, err)
	assert.True(t, wrote, "always")
	assert.Equal(t, "7", (*applied)[len(*applied)-1]["metadata"].(map[string]any)["resourceVersion"], "the precondition")

	bin := &v1.BinaryStatus{Image: "i", Release: "r", SHA256: "a", URL: "u"}
	have = v1.ObjectStoreStatus{Binary: bin, Conditions: []metav1.Condition{cond}}
	want = have
	want.Binary = &v1.BinaryStatus{Image: "j", Release: "r", SHA256: "a", URL: "u"}
	wrote, err = w.Write(t.Context(), s, have, want, Options{})
	require.NoError(t, err)
	assert.True(t, wrote, "status.binary of another image")

	at := metav1.NewTime(time.Unix(2000, 0))
	stop := &v1.StoppedUpdate{Release: "x", Reason: "DryRunFailed", At: at, RetryAt: at}
	have = v1.ObjectStoreStatus{Stopped: stop, Conditions: []metav1.Condition{cond}}
	want = have
	want.Stopped = &v1.StoppedUpdate{Release: "x", Reason: "DryRunFailed", At: metav1.NewTime(at.Local()), RetryAt: at}
	wrote, err = w.Write(t.Context(), s, have, want, Options{})
	require.NoError(t, err)
	assert.False(t, wrote, "the same stop, its times compared by their instant")
	want.Stopped = nil
	wrote, err = w.Write(t.Context(), s, have, want, Options{})
	require.NoError(t, err)
	assert.True(t, wrote, "status.stopped cleared")
}
