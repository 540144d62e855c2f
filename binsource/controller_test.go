package binsource

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/internal/reason/reasontest"
	"github.com/object-store-operator/operator/internal/registryguard"
	"github.com/object-store-operator/operator/internal/secretcache"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/test/fakeapi"
)

// controllerFixture is fakeapi.API with the controller over it; the
// pull Secret cases never reach a registry.
type controllerFixture struct {
	*fakeapi.API
	c *Controller
	// term is the leadership term's context once lead was called.
	term atomic.Pointer[context.Context]
}

func newControllerFixture(t *testing.T, store *unstructured.Unstructured, objs ...runtime.Object) *controllerFixture {
	t.Helper()
	return newControllerFixtureOver(t, nil, store, objs...)
}

// newControllerFixtureOver is newControllerFixture whose registries are
// reached through transport (nil: the network).
func newControllerFixtureOver(t *testing.T, transport http.RoundTripper, store *unstructured.Unstructured, objs ...runtime.Object) *controllerFixture {
	t.Helper()
	bs, err := binstore.New(t.TempDir(), zerolog.Nop(), binstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { bs.Close() })
	bs.Scan()
	fetcher, err := NewFetcher(FetcherConfig{Store: bs, PullTimeout: time.Second, Transport: transport})
	require.NoError(t, err)
	f := &controllerFixture{API: fakeapi.New([]*unstructured.Unstructured{store}, objs...)}
	// The shared Secret cache over a metadata informer that holds objs'
	// Secrets.
	meta := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok {
			require.NoError(t, meta.Add(&metav1.PartialObjectMetadata{ObjectMeta: s.ObjectMeta}))
		}
	}
	stores := testutil.SyncedInformer()
	f.c, err = NewController(ControllerConfig{
		Secrets: secretcache.NewReader(meta, f.Kube, func(map[string][]byte) string { return "" }, secretcache.Limits{}), Dynamic: f.Dynamic,
		ObjectStores: stores, Fetcher: fetcher, Recorder: record.NewFakeRecorder(10),
		Reasons: reasontest.Spelled(t, Reasons(), "OPERATOR_"), Log: zerolog.Nop(),
		Leading: func() context.Context {
			if term := f.term.Load(); term != nil {
				return *term
			}
			return nil
		},
	})
	require.NoError(t, err)
	require.NoError(t, stores.GetIndexer().Add(store))
	return f
}

// lead makes the fixture's replica the leader, as the Manager does: the
// term's context, and the Reporter queues every key (these tests sync by
// hand, so the queue is emptied).
func (f *controllerFixture) lead(t *testing.T) {
	term := t.Context()
	f.term.Store(&term)
	require.NoError(t, f.c.Reporter().Run(term))
	require.Equal(t, len(f.c.stores.ListKeys()), f.c.queue.Len())
	for f.c.queue.Len() > 0 {
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
	}
}

func objectStoreWithImage(image string, pullSecrets ...string) *unstructured.Unstructured {
	spec := map[string]any{"image": image}
	var refs []any
	for _, s := range pullSecrets {
		refs = append(refs, map[string]any{"name": s})
	}
	if refs != nil {
		spec["imagePullSecrets"] = refs
	}
	return fakeapi.UnstructuredObjectStore("t", "s", spec)
}

func condition(t *testing.T, f *controllerFixture) metav1.Condition {
	t.Helper()
	return f.Condition(t, "t", "s")
}

func TestSyncWithAMissingPullSecretReportsItAndPullsNothing(t *testing.T) {
	f := newControllerFixture(t, objectStoreWithImage("registry.example/minio/aistor:RELEASE.2026-01-10T10-00-00Z", "regcred"))
	f.lead(t)
	err := f.c.sync(context.Background(), "t/s")
	require.Error(t, err, "retried with backoff: the Secret may be created any time")
	assert.Equal(t, []string{"patch objectstores/status"}, f.Actions(), "the Secret cache knows it is missing: no GET")
	c := condition(t, f)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "PullSecretUnusable", c.Reason)
	assert.Contains(t, c.Message, "pull Secret regcred not found in namespace t. create or fix it: a Secret of type kubernetes.io/dockerconfigjson")
	o, ok := f.c.outcomes["t/s"]
	require.True(t, ok, "resolved, unavailable")
	assert.Equal(t, "registry.example/minio/aistor:RELEASE.2026-01-10T10-00-00Z", o.image)
	assert.Equal(t, metav1.ConditionFalse, o.condition.Status)
}

func TestSyncWithAPullSecretOfTheWrongTypeSaysSo(t *testing.T) {
	wrong := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "t"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	f := newControllerFixture(t, objectStoreWithImage("registry.example/minio/aistor:RELEASE.2026-01-10T10-00-00Z", "regcred"), wrong)
	f.lead(t)
	require.Error(t, f.c.sync(context.Background(), "t/s"))
	c := condition(t, f)
	assert.Equal(t, "PullSecretUnusable", c.Reason)
	assert.Contains(t, c.Message, "pull Secret t/regcred is neither of type kubernetes.io/dockerconfigjson")
}

func TestSyncWhileFollowingResolvesButWritesNothing(t *testing.T) {
	f := newControllerFixture(t, objectStoreWithImage("registry.example/minio/aistor:RELEASE.2026-01-10T10-00-00Z", "regcred"))
	require.Error(t, f.c.sync(context.Background(), "t/s"))
	assert.Empty(t, f.Actions(), "every replica resolves; only the leader writes the condition")
	o, ok := f.c.outcomes["t/s"]
	assert.True(t, ok && o.image == "registry.example/minio/aistor:RELEASE.2026-01-10T10-00-00Z", "what it found is kept for when it leads")
}

func TestSyncOfAnObjectStoreWithoutImageDoesNothing(t *testing.T) {
	f := newControllerFixture(t, objectStoreWithImage(""))
	f.lead(t)
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Empty(t, f.Actions())
}

// storeWithStatus is objectStoreWithImage named name, at generation gen,
// with a BinaryAvailable condition of status st observed at observed
// (none when st is empty).
func storeWithStatus(name string, gen int64, st metav1.ConditionStatus, observed int64) *unstructured.Unstructured {
	u := objectStoreWithImage("registry.example/minio/aistor:RELEASE.2026-01-10T10-00-00Z", "regcred")
	u.SetName(name)
	u.SetGeneration(gen)
	if st != "" {
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{
			"type": v1.ConditionBinaryAvailable, "status": string(st), "reason": "R", "message": "m",
			"observedGeneration": observed, "lastTransitionTime": "2026-11-22T00:00:00Z",
		}}}
	}
	return u
}

func TestReadyWaitsOnlyForReleasesTheLeaderServes(t *testing.T) {
	served := storeWithStatus("served", 2, metav1.ConditionTrue, 2)
	f := newControllerFixture(t, served)
	for _, u := range []*unstructured.Unstructured{
		storeWithStatus("image-changed", 3, metav1.ConditionTrue, 2), // the leader has not resolved the new image
		storeWithStatus("failing-on-the-leader", 1, metav1.ConditionFalse, 1),
		storeWithStatus("not-resolved-anywhere", 1, "", 0), // a pull still running, a registry that hangs
	} {
		require.NoError(t, f.c.stores.Add(u))
	}

	err := f.c.Ready()
	require.Error(t, err, "this replica lacks a release the leader serves")
	assert.Equal(t, "binaries of 1 ObjectStore(s) the leader serves are not in this replica's store yet (t/served)", err.Error(),
		"what nobody serves yet holds no replica back")

	// Its own attempt ends with a reason (here: no pull Secret): it has
	// given up on that release with a reported reason, and is ready.
	require.Error(t, f.c.sync(context.Background(), "t/served"))
	assert.NoError(t, f.c.Ready())
}

// TestSyncsDoNotWaitForARegistryThatNeverAnswers: a sync submits the pull
// and returns at once, so a silent registry holds no worker (and no other
// tenant's sync); the pull's end queues the ObjectStore again, and that
// sync reports the outcome.
func TestSyncsDoNotWaitForARegistryThatNeverAnswers(t *testing.T) {
	// In a bubble: the pull's deadline passes on the fake clock.
	synctest.Test(t, testSyncsDoNotWaitForARegistryThatNeverAnswers)
}

func testSyncsDoNotWaitForARegistryThatNeverAnswers(t *testing.T) {
	// Every request is held until the pull gives it up. A listener that
	// accepts and never answers holds it the same way, but on real time.
	silent := registryguard.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
	image := "127.0.0.1:5000/minio/aistor:RELEASE.2026-01-10T10-00-00Z"
	f := newControllerFixtureOver(t, silent, objectStoreWithImage(image))
	// The queue's delaying loop ends with the bubble.
	t.Cleanup(f.c.queue.ShutDown)
	f.lead(t)
	start := time.Now()
	require.NoError(t, f.c.sync(t.Context(), "t/s"))
	assert.Less(t, time.Since(start), 500*time.Millisecond, "the sync returned without waiting for the registry")
	assert.True(t, f.c.pulling("t/s"))
	assert.Empty(t, f.Actions(), "nothing to report yet")
	require.NoError(t, f.c.sync(t.Context(), "t/s"), "a second sync finds the pull in flight")

	key, _ := f.c.queue.Get() // queued again when the pull ended (its 1 s deadline)
	assert.Equal(t, "t/s", key)
	f.c.queue.Done(key)
	require.Error(t, f.c.sync(t.Context(), "t/s"))
	assert.Equal(t, "PullTimeout", condition(t, f).Reason)
	assert.False(t, f.c.pulling("t/s"), "the result was taken")
}

// TestPullSecretsAreReadOncePerResourceVersion: every replica syncs every
// ObjectStore on every resync; its pull Secrets come from the shared
// Secret cache, read from the apiserver once per resource version, not
// once per sync.
func TestPullSecretsAreReadOncePerResourceVersion(t *testing.T) {
	wrong := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "t", ResourceVersion: "1"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	f := newControllerFixture(t, objectStoreWithImage("registry.example/minio/aistor:RELEASE.2026-01-10T10-00-00Z", "regcred"), wrong)
	for range 3 {
		require.Error(t, f.c.sync(context.Background(), "t/s"))
	}
	assert.Equal(t, []string{"get secrets"}, f.Actions(), "one GET for three syncs")
}

func TestAnImageWithoutABinaryIsExplainedOnceWithTheRemedy(t *testing.T) {
	image := "registry.example/minio/b:RELEASE.2026-01-10T10-00-00Z"
	store := objectStoreWithImage(image)
	f := newControllerFixture(t, store)
	f.lead(t)
	// What the fetcher returns for an image whose layers hold no binary.
	cause := fmt.Errorf("%s for linux/amd64: %w", image, reasonf(errNoBinary, "no %s in any layer", strings.Join(binaryPaths, " or ")))

	require.Error(t, f.c.fail(context.Background(), store, image, cause))

	c := condition(t, f)
	assert.Equal(t, "NoMinIOBinary", c.Reason)
	assert.NotContains(t, c.Message, "NoMinIOBinary", "the reason is the condition's, not repeated in its message")
	assert.Equal(t, image+" for linux/amd64: no opt/bin/minio or usr/bin/minio in any layer. "+
		"set the ObjectStore's image to a MinIO release image (one that holds opt/bin/minio or usr/bin/minio for the tenant's platform), "+
		"or set OPERATOR_RELEASE_MIRROR_URL to a mirror of MinIO's release directories", c.Message)
}
