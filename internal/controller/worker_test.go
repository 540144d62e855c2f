package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
)

func TestTrimForCacheDropsManagedFieldsAndLastApplied(t *testing.T) {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "pool-0",
		Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: `{"the":"whole object again"}`,
			"aistor.min.io/objectstore-name":   "tenant",
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	out, err := TrimForCache(s)
	require.NoError(t, err)
	got := out.(*appsv1.StatefulSet)
	assert.Nil(t, got.ManagedFields)
	assert.Equal(t, map[string]string{"aistor.min.io/objectstore-name": "tenant"}, got.Annotations, "other annotations stay")
}

func TestRunWaitsForSyncsInFlightAndReportsErrorsWithTheKey(t *testing.T) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour))
	started, release := make(chan struct{}), make(chan struct{})
	var failed []string
	sync := func(_ context.Context, key string) error {
		if key == "ns/fails" {
			return errors.New("boom")
		}
		close(started)
		<-release
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	queue.Add("ns/fails")
	go func() {
		Run(ctx, queue, 1, sync, func(key string, err error) { failed = append(failed, key+": "+err.Error()) })
		close(returned)
	}()
	queue.Add("ns/slow")
	<-started
	assert.Equal(t, []string{"ns/fails: boom"}, failed, "the error is reported with its key")
	assert.Equal(t, 1, queue.NumRequeues("ns/fails"), "and the key requeued with backoff")
	cancel()
	select {
	case <-returned:
		t.Fatal("Run returned while a sync was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-returned
	assert.True(t, queue.ShuttingDown())
}

func TestAPanickingSyncIsRecoveredRequeuedAndTheOtherKeysSync(t *testing.T) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour))
	synced := make(chan string, 2)
	sync := func(_ context.Context, key string) error {
		if key == "ns/hostile" {
			var nodes []string
			_ = nodes[0] // what a hotfix label once did to the updater
		}
		synced <- key
		return nil
	}
	reg := prometheus.NewRegistry()
	var reported []string
	var errs []error
	onError := HandlePanics(PanicCounter(reg, "test"), zerolog.Nop(),
		func(key, msg string) { reported = append(reported, key+": "+msg) },
		func(_ string, err error) { errs = append(errs, err) })
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	queue.Add("ns/hostile")
	queue.Add("ns/other")
	go func() {
		Run(ctx, queue, 1, sync, onError)
		close(returned)
	}()
	assert.Equal(t, "ns/other", <-synced, "the next key is synced by the same worker")
	cancel()
	<-returned
	require.Len(t, reported, 1)
	assert.Contains(t, reported[0], "ns/hostile: the operator failed on this object (runtime error: index out of range")
	var p *PanicError
	require.Len(t, errs, 1)
	require.ErrorAs(t, errs[0], &p)
	assert.Contains(t, string(p.Stack), "worker_test.go", "the stack says where")
	assert.Equal(t, 1, queue.NumRequeues("ns/hostile"), "requeued with backoff")
	assert.Equal(t, 1.0, testutil.ToFloat64(PanicCounter(reg, "test")), "counted, the metric shared by name")
}
