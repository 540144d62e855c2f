package updates

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/testutil"
	objstatus "github.com/object-store-operator/operator/status"
)

// fakeAdmin is one tenant's MinIO admin API: nodes on releases, and the
// update calls it was asked.
type fakeAdmin struct {
	mu       sync.Mutex
	releases []string
	// calls counts the real update calls, dryRuns the dry runs.
	calls, dryRuns int
	// dryRunFail, when set, is every node's error in a dry run (a
	// signature MinIO refuses); damaged dry runs answer first with node
	// n1's copy damaged, MinIO's bug right after a start.
	dryRunFail string
	damaged    int
	// hang makes ServerUpdateV2 answer only when its context ends.
	hang bool
	// panics makes ServerUpdateV2 panic, as a client library might on a
	// hostile answer.
	panics bool
	// refuse makes ServerUpdateV2 answer MinIO's error (MINIO_UPDATE=off).
	refuse bool
	// refusal, when set, is the message of the refusal; code its code
	// (default MethodNotAllowed).
	refusal, code string
}

func (f *fakeAdmin) ServerInfo(context.Context, ...func(*madmin.ServerInfoOpts)) (madmin.InfoMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var info madmin.InfoMessage
	for i, r := range f.releases {
		t, err := releaseTime(r)
		if err != nil {
			return info, err
		}
		info.Servers = append(info.Servers, madmin.ServerProperties{Endpoint: fmt.Sprintf("n%d:9000", i),
			State: string(madmin.ItemOnline), Version: t.Format(time.RFC3339)})
	}
	return info, nil
}

func (f *fakeAdmin) ServerUpdateV2(ctx context.Context, opts madmin.ServerUpdateOpts) (madmin.ServerUpdateStatusV2, error) {
	f.mu.Lock()
	if opts.DryRun {
		f.dryRuns++
	} else {
		f.calls++
	}
	hang, n := f.hang, len(f.releases)
	damaged := opts.DryRun && f.damaged > 0
	if damaged {
		f.damaged--
	}
	fail := f.dryRunFail
	f.mu.Unlock()
	if f.panics {
		var results []madmin.ServerPeerUpdateStatus
		_ = results[n]
	}
	if f.refuse {
		msg := "The specified method is not allowed against this resource."
		if f.refusal != "" {
			msg = f.refusal
		}
		code := "MethodNotAllowed"
		if f.code != "" {
			code = f.code
		}
		return madmin.ServerUpdateStatusV2{}, madmin.ErrorResponse{Code: code, Message: msg}
	}
	if hang {
		<-ctx.Done()
		return madmin.ServerUpdateStatusV2{}, ctx.Err()
	}
	// Every node took the binary; they restart on it later (or, in a dry
	// run, every node verified it).
	res := madmin.ServerUpdateStatusV2{DryRun: opts.DryRun}
	for i := range n {
		r := madmin.ServerPeerUpdateStatus{Host: fmt.Sprintf("n%d:9000", i)}
		switch {
		case opts.DryRun && fail != "":
			r.Err = fail
		case damaged && i == 1:
			r.Err = "Updated file has wrong checksum. Expected: a, got: b"
		}
		res.Results = append(res.Results, r)
	}
	return res, nil
}

func (f *fakeAdmin) dryRunCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dryRuns
}

// callCount is how many times MinIO was asked to update, dry runs
// included; realCalls counts the real calls alone.
func (f *fakeAdmin) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls + f.dryRuns
}

func (f *fakeAdmin) realCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// fakeBinaries says how the fixture's syncs meet their tenants:
// panicFor, a namespace/name whose sync panics (a bug met on one tenant's
// input).
type fakeBinaries struct{ panicFor string }

// updateBase is the upgrade server's base URL in the fixtures.
const updateBase = "http://op.ops.svc:4221/webhook/v1/update"

// newSHA is the SHA-256 of the fixtures' new release binary.
const newSHA = "4f6a0e0f4f6a0e0f4f6a0e0f4f6a0e0f4f6a0e0f4f6a0e0f4f6a0e0f4f6a0e0f"

// binaryAvailable is what the binary source writes for imgNew: status.binary
// and BinaryAvailable=True, for the object's first generation.
func binaryAvailable() map[string]any {
	return map[string]any{
		"binary": map[string]any{"image": imgNew, "release": relNew, "sha256": newSHA, "platform": "linux-amd64",
			"url": updateBase + "/sha256/" + newSHA + "/minio." + relNew + ".sha256sum"},
		"conditions": []any{map[string]any{"type": v1.ConditionBinaryAvailable, "status": "True", "reason": "Available",
			"message": "minio." + relNew + " is served", "lastTransitionTime": "2026-01-01T00:00:00Z"}},
	}
}

// fixture is sample-controller's shape: fake clients preloaded, the
// informers' caches filled by hand, MinIO's admin API faked per tenant.
type fixture struct {
	kube   *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	c      *Controller
	stores cache.Indexer
	admins map[string]*fakeAdmin // endpoint host -> admin
	// binaries: see fakeBinaries.
	binaries fakeBinaries
}

func tenantStore(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": v1.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": "1", "uid": name + "-uid"},
		"spec":     map[string]any{"image": imgNew, "configuration": map[string]any{"name": "env"}},
		"status":   binaryAvailable(),
	}}
	return u
}

func newFixture(t *testing.T, binaries fakeBinaries, stores ...*unstructured.Unstructured) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, binaries, stores...)
}

// newFixtureWith is newFixture with the Config changed by set.
func newFixtureWith(t *testing.T, set func(*Config), binaries fakeBinaries, stores ...*unstructured.Unstructured) *fixture {
	t.Helper()
	f := &fixture{admins: map[string]*fakeAdmin{}, binaries: binaries}
	var objs, sets []runtime.Object
	seen := map[string]bool{}
	for _, s := range stores {
		objs = append(objs, s)
		ns, name := s.GetNamespace(), s.GetName()
		if !seen[ns] {
			seen[ns] = true
			sets = append(sets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "env", Namespace: ns},
				Data: map[string][]byte{v1.ConfigEnvKey: []byte("export MINIO_ROOT_USER=a\nexport MINIO_ROOT_PASSWORD=b\n")}})
		}
		f.admins[fmt.Sprintf("%s-hl.%s.svc.cluster.local:9000", name, ns)] = &fakeAdmin{releases: []string{relOld, relOld, relOld, relOld}}
	}
	var setObjs []runtime.Object
	for _, s := range stores {
		set := statefulSet(s.GetName()+"-pool-0", s.GetName(), corev1.Container{Name: "minio", Image: "minio/aistor:old"})
		set.Namespace = s.GetNamespace()
		setObjs = append(setObjs, set)
	}
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1.Resource: v1.Kind + "List"}, objs...)
	f.dyn.PrependReactor("patch", "objectstores", testutil.ApplyStatus(f.dyn, v1.Resource, "release", "nodesOn", "nodes", "update", "updatePhase", "stopped"))
	informer := testutil.SyncedInformer()
	kube := testutil.Clientset(append(sets, setObjs...)...)
	f.kube = kube
	cfg := Config{
		Kube: kube, Dynamic: f.dyn, ObjectStores: informer, Secrets: apiSecrets{kube},
		StatefulSets: setsLister(t, setObjs...), ClusterDomain: "cluster.local", UpdateURL: updateBase,
		Timeout: time.Minute, Poll: time.Hour, MaxPoll: time.Hour, CallsPerNamespace: 1, Workers: 2,
		Recorder: record.NewFakeRecorder(100), Registerer: prometheus.NewRegistry(), Log: zerolog.Nop(),
	}
	if set != nil {
		set(&cfg)
	}
	var err error
	f.c, err = New(cfg)
	require.NoError(t, err)
	f.wire()
	f.stores = informer.GetIndexer()
	for _, s := range stores {
		require.NoError(t, f.stores.Add(s.DeepCopy()))
	}
	return f
}

func (f *fixture) wire() {
	f.c.dial = func(t *tenant, host string) (adminAPI, func(), error) {
		if ns, name, _ := strings.Cut(f.binaries.panicFor, "/"); ns == t.namespace && strings.HasPrefix(t.endpoint.Host, name+"-hl.") {
			var none []string
			_ = none[len(host)] // a bug met on one tenant's input
		}
		if a, ok := f.admins[t.endpoint.Host]; ok {
			return a, func() {}, nil
		}
		return nil, nil, fmt.Errorf("dial %s: connection refused", t.endpoint.Host)
	}
}

// restart stands a new process (or a new leader) in for the controller:
// nothing in memory, its cache filled from what the apiserver holds.
func (f *fixture) restart(t *testing.T) {
	cfg := f.c.cfg
	informer := testutil.SyncedInformer()
	cfg.ObjectStores, cfg.Registerer = informer, prometheus.NewRegistry()
	var err error
	f.c, err = New(cfg)
	require.NoError(t, err)
	f.wire()
	f.stores = informer.GetIndexer()
	list, err := f.dyn.Resource(v1.Resource).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for i := range list.Items {
		require.NoError(t, f.stores.Add(list.Items[i].DeepCopy()))
	}
	f.lead(t)
}

// catchUp has the cache hold what the apiserver holds for key.
func (f *fixture) catchUp(t *testing.T, ns, name string) {
	u, err := f.dyn.Resource(v1.Resource).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, f.stores.Update(u))
}

// lead starts a leadership term, as the Manager does: the halt record is
// read afresh. Syncs act whenever a test calls them.
func (f *fixture) lead(t *testing.T) {
	require.True(t, f.c.NeedLeaderElection())
	f.c.lead()
}

func (f *fixture) admin(ns, name string) *fakeAdmin {
	return f.admins[fmt.Sprintf("%s-hl.%s.svc.cluster.local:9000", name, ns)]
}

// live is the ObjectStore as the fake apiserver holds it.
func (f *fixture) live(t *testing.T, ns, name string) *v1.ObjectStore {
	u, err := f.dyn.Resource(v1.Resource).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	s, err := v1.FromUnstructured(u)
	require.NoError(t, err)
	return s
}

func (f *fixture) waitCallDone(t *testing.T, key string) {
	require.Eventually(t, func() bool { return !f.c.calls.state(key).running }, 5*time.Second, time.Millisecond)
}

// dryRun has ns/name's update make its dry run, and the cache catch up:
// the next sync acts on its answer (the real call, when it passed).
func (f *fixture) dryRun(t *testing.T, ns, name string) {
	t.Helper()
	key := ns + "/" + name
	require.NoError(t, f.c.sync(t.Context(), key))
	f.waitCallDone(t, key)
	f.catchUp(t, ns, name)
}

// TestACacheBehindTheStatusNeverCallsTwice: the call is recorded in the
// status, but the informer still holds the object from before (a watch
// lagging by seconds). The next sync reads the live object before any
// call, sees the call recorded and follows it: MinIO is called once.
func TestACacheBehindTheStatusNeverCallsTwice(t *testing.T) {
	f := newFixture(t, fakeBinaries{}, tenantStore("t", "tenant"))
	f.lead(t)
	ctx := t.Context()

	f.dryRun(t, "t", "tenant")
	require.NoError(t, f.c.sync(ctx, "t/tenant"))
	f.waitCallDone(t, "t/tenant")
	require.Equal(t, 1, f.admin("t", "tenant").realCalls())
	up := f.live(t, "t", "tenant").Status.Update
	require.NotNil(t, up, "the call was recorded")
	assert.Equal(t, 1, up.Calls)

	// The cache is held behind: it still records no real call (the dry
	// run's record alone).
	cached, _, _ := f.stores.GetByKey("t/tenant")
	require.Zero(t, objstatus.ObjectStore(cached.(*unstructured.Unstructured)).Status.Update.Calls)
	for range 3 {
		require.NoError(t, f.c.sync(ctx, "t/tenant"))
	}
	assert.Equal(t, 1, f.admin("t", "tenant").realCalls(), "one call, however far the cache lags")
	st := f.live(t, "t", "tenant")
	require.NotNil(t, st.Status.Update)
	assert.Equal(t, 1, st.Status.Update.Calls)
	assert.Equal(t, ReasonUpdatingInPlace, conditionOf(st).Reason)
}

// TestARecordThatLostItsRaceCallsNothing: the object changed between the
// live read and the record (another writer, or a second leader for a
// moment): the apiserver refuses the conditional record, and nothing is
// called.
func TestARecordThatLostItsRaceCallsNothing(t *testing.T) {
	f := newFixture(t, fakeBinaries{}, tenantStore("t", "tenant"))
	f.lead(t)
	f.dyn.PrependReactor("get", "objectstores", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := f.dyn.Tracker().Get(v1.Resource, "t", "tenant")
		if err != nil {
			return true, nil, err
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		// The object as this sync read it; the store moves on right after.
		moved := obj.(*unstructured.Unstructured).DeepCopy()
		testutil.BumpResourceVersion(moved)
		_ = f.dyn.Tracker().Update(v1.Resource, moved, "t")
		return true, u, nil
	})
	err := f.c.sync(t.Context(), "t/tenant")
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "%v", err)
	assert.Equal(t, 0, f.admin("t", "tenant").callCount(), "no call without its record")
	assert.False(t, f.c.calls.state("t/tenant").running)
}

// TestHangingUpdateCallsHoldNoWorkerNorOtherNamespace: four ObjectStores
// in one namespace whose MinIO never answers an update call, and a
// healthy one in another namespace. One call of the first namespace runs
// (its share), the other three wait for it without holding a worker; the
// healthy tenant is called at once.
func TestHangingUpdateCallsHoldNoWorkerNorOtherNamespace(t *testing.T) {
	stores := []*unstructured.Unstructured{tenantStore("hostile", "h0"), tenantStore("hostile", "h1"),
		tenantStore("hostile", "h2"), tenantStore("hostile", "h3"), tenantStore("good", "tenant")}
	f := newFixture(t, fakeBinaries{}, stores...)
	for i := range 4 {
		f.admin("hostile", fmt.Sprintf("h%d", i)).hang = true
	}
	f.lead(t)
	ctx := t.Context()
	for i := range 4 {
		done := make(chan error, 1)
		go func() { done <- f.c.sync(ctx, fmt.Sprintf("hostile/h%d", i)) }()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("a sync waited for MinIO's answer")
		}
	}
	assert.True(t, f.c.calls.state("hostile/h0").running)
	for i := 1; i < 4; i++ {
		st := f.live(t, "hostile", fmt.Sprintf("h%d", i))
		assert.Equal(t, ReasonUpdateQueued, conditionOf(st).Reason, "h%d waits for its namespace's call slot", i)
		assert.Nil(t, st.Status.Update, "nothing recorded, nothing called")
		assert.Equal(t, 0, f.admin("hostile", fmt.Sprintf("h%d", i)).callCount())
	}
	require.NoError(t, f.c.sync(ctx, "good/tenant"))
	f.waitCallDone(t, "good/tenant")
	assert.Equal(t, 1, f.admin("good", "tenant").callCount(), "the healthy tenant is called at once")
}

// TestAPanickingSyncIsReportedAndTheOthersSync: a sync that panics on one
// ObjectStore's input is reported InternalError on it; the process, and
// every other ObjectStore, carry on.
func TestAPanickingSyncIsReportedAndTheOthersSync(t *testing.T) {
	f := newFixture(t, fakeBinaries{panicFor: "t/hostile"}, tenantStore("t", "hostile"), tenantStore("u", "tenant"))
	f.lead(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = f.c.Run(ctx) }()
	f.c.queue.Add("t/hostile")
	f.c.queue.Add("u/tenant")
	require.Eventually(t, func() bool { return f.admin("u", "tenant").realCalls() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the other ObjectStore is synced (its dry run, then its call)")
	require.Eventually(t, func() bool {
		return conditionOf(f.live(t, "t", "hostile")).Reason == controller.ReasonInternalError
	}, 5*time.Second, 5*time.Millisecond)
	c := conditionOf(f.live(t, "t", "hostile"))
	assert.Equal(t, metav1.ConditionUnknown, c.Status)
	assert.Contains(t, c.Message, "index out of range")
}

func conditionOf(s *v1.ObjectStore) metav1.Condition {
	for _, c := range s.Status.Conditions {
		if c.Type == v1.ConditionVersionCurrent {
			return c
		}
	}
	return metav1.Condition{}
}

// TestAPanicWhileReadingMinIOsAnswerIsThatTenantsAlone: the update call
// runs beside the workers; a panic there (a client library on a hostile
// answer) is recovered, reported InternalError on that ObjectStore, and
// the process and the other tenants carry on.
func TestAPanicWhileReadingMinIOsAnswerIsThatTenantsAlone(t *testing.T) {
	f := newFixture(t, fakeBinaries{}, tenantStore("t", "hostile"), tenantStore("u", "tenant"))
	f.admin("t", "hostile").panics = true
	f.lead(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = f.c.Run(ctx) }()
	f.c.queue.Add("t/hostile")
	f.c.queue.Add("u/tenant")
	require.Eventually(t, func() bool {
		return conditionOf(f.live(t, "t", "hostile")).Reason == controller.ReasonInternalError
	}, 5*time.Second, 5*time.Millisecond)
	assert.Contains(t, conditionOf(f.live(t, "t", "hostile")).Message, "index out of range")
	// The other tenant's sync runs on the other worker: it may end after
	// the hostile one.
	require.Eventually(t, func() bool { return f.admin("u", "tenant").realCalls() >= 1 }, 5*time.Second, 5*time.Millisecond,
		"the other tenant was called (after its dry run)")
	assert.Equal(t, 1, f.admin("u", "tenant").realCalls(), "the other tenant was called once")
}

// TestARefusalNamesItsNodeAndReadsAsSentences: MinIO refuses the update
// (MINIO_UPDATE=off). The condition says which node refused, quotes
// MinIO's own error, and joins it to the remedy without doubled
// punctuation.
func TestARefusalNamesItsNodeAndReadsAsSentences(t *testing.T) {
	f := newFixture(t, fakeBinaries{}, tenantStore("t", "tenant"))
	f.c.cfg.Reasons = reason.Set{CauseInPlaceRefused: {Name: CauseInPlaceRefused, Severity: reason.Warning,
		Remedy: "mINIO's own error is above: MethodNotAllowed means MINIO_UPDATE=off"}}
	f.admin("t", "tenant").refuse = true
	f.lead(t)
	require.NoError(t, f.c.sync(t.Context(), "t/tenant"))
	f.waitCallDone(t, "t/tenant")
	require.NoError(t, f.c.sync(t.Context(), "t/tenant"))
	c := conditionOf(f.live(t, "t", "tenant"))
	require.Equal(t, ReasonRollingUpdate, c.Reason, c.Message)
	assert.Contains(t, c.Message, "tenant-hl.t.svc.cluster.local:9000", "the node that refused")
	assert.Contains(t, c.Message, "MethodNotAllowed: The specified method is not allowed against this resource. MINIO's own error")
	assert.NotContains(t, c.Message, "..")
	assert.NotContains(t, c.Message, ".;")
}

// TestOurOwn503IsNotTheTenantsFailure: MinIO could not fetch the release
// because the operator's own upgrade server answered 503 (its limits).
// The tenant is not rolled, the release's failure budget is not spent,
// and the condition says so; the call is made again after a pause.
func TestOurOwn503IsNotTheTenantsFailure(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.FailureBudget, c.HaltNamespace = 1, "ops" }, fakeBinaries{}, tenantStore("t", "tenant"))
	adm := f.admin("t", "tenant")
	adm.refuse, adm.code = true, "XMinioAdminUpdateUnexpectedFailure"
	adm.refusal = "Error downloading URL http://op.ops.svc:4221/webhook/v1/update/sha256/ab/c/minio." + relNew + ".sha256sum. Response: 503 Service Unavailable"
	f.lead(t)
	require.NoError(t, f.c.sync(t.Context(), "t/tenant"))
	f.waitCallDone(t, "t/tenant")
	require.NoError(t, f.c.sync(t.Context(), "t/tenant"))

	c := conditionOf(f.live(t, "t", "tenant"))
	require.Equal(t, CauseDownloadRefused, c.Reason, c.Message)
	assert.Contains(t, c.Message, "not the tenant's failure")
	for _, a := range f.kube.Actions() {
		assert.False(t, a.GetVerb() == "patch" && a.GetResource().Resource == "statefulsets", "no StatefulSet is rolled: %v", a)
		assert.False(t, a.GetResource().Resource == "leases" && a.GetVerb() != "get", "nothing is counted against the release (a budget of 1 would halt it): %v", a)
	}
	assert.Equal(t, 1, adm.callCount())
}

// TestACacheBehindARollKeepsWhyItRolled: MinIO refused the update and the
// StatefulSets were rolled; the StatefulSet informer already holds the new
// image while the ObjectStore cache still holds the status from before
// the roll. The next sync keeps RollingUpdate and its message (why it
// rolled, and the remedy) until the nodes run the release; it does not
// overwrite it with WaitingForNodes.
func TestACacheBehindARollKeepsWhyItRolled(t *testing.T) {
	f := newFixture(t, fakeBinaries{}, tenantStore("t", "tenant"))
	f.admin("t", "tenant").refuse = true
	f.lead(t)
	ctx := t.Context()

	require.NoError(t, f.c.sync(ctx, "t/tenant"))
	f.waitCallDone(t, "t/tenant")
	f.catchUp(t, "t", "tenant")
	require.NoError(t, f.c.sync(ctx, "t/tenant"))
	rolled := conditionOf(f.live(t, "t", "tenant"))
	require.Equal(t, ReasonRollingUpdate, rolled.Reason)

	sets, err := f.kube.AppsV1().StatefulSets("t").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var objs []runtime.Object
	for i := range sets.Items {
		require.Equal(t, imgNew, sets.Items[i].Spec.Template.Spec.Containers[0].Image, "rolled")
		objs = append(objs, &sets.Items[i])
	}
	f.c.cfg.StatefulSets = setsLister(t, objs...)
	require.NoError(t, f.c.sync(ctx, "t/tenant"))
	c := conditionOf(f.live(t, "t", "tenant"))
	assert.Equal(t, ReasonRollingUpdate, c.Reason, "why it rolled stays until the nodes run the release")
	assert.Equal(t, rolled.Message, c.Message)
}

// TestARollAfterAnotherWritersChangeIsReported: another controller wrote
// the ObjectStore (binsource's condition, say) after the cache's copy,
// and this sync rolls the StatefulSets (a downgrade: MinIO updates in
// place only forward). The roll is made, so its report is written over
// whatever the object became: RollingUpdate and why, not a decision taken
// again on StatefulSets that already run the image (WaitingForNodes).
func TestARollAfterAnotherWritersChangeIsReported(t *testing.T) {
	f := newFixture(t, fakeBinaries{}, tenantStore("t", "tenant"))
	f.admin("t", "tenant").releases = []string{relNewer, relNewer, relNewer, relNewer}
	f.c.cfg.StatefulSets = liveSets{t: t, kube: f.kube} // sees the roll's patch at once
	f.lead(t)
	obj, err := f.dyn.Tracker().Get(v1.Resource, "t", "tenant")
	require.NoError(t, err)
	moved := obj.(*unstructured.Unstructured).DeepCopy()
	testutil.BumpResourceVersion(moved)
	require.NoError(t, f.dyn.Tracker().Update(v1.Resource, moved, "t"))

	require.NoError(t, f.c.sync(t.Context(), "t/tenant"))
	c := conditionOf(f.live(t, "t", "tenant"))
	assert.Equal(t, ReasonRollingUpdate, c.Reason)
	assert.Contains(t, c.Message, "MinIO updates in place only forward")
}

// liveSets lists StatefulSets from the clientset as it is now: a cache
// that never lags.
type liveSets struct {
	appslisters.StatefulSetLister // GetPodStatefulSets: not used here
	t                             *testing.T
	kube                          *fake.Clientset
}

func (l liveSets) List(sel labels.Selector) ([]*appsv1.StatefulSet, error) {
	return l.StatefulSets("").List(sel)
}

func (l liveSets) StatefulSets(ns string) appslisters.StatefulSetNamespaceLister {
	list, err := l.kube.AppsV1().StatefulSets(ns).List(l.t.Context(), metav1.ListOptions{})
	require.NoError(l.t, err)
	var objs []runtime.Object
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	return setsLister(l.t, objs...).StatefulSets(ns)
}

// TestACacheBehindTheEndOfAnUpdateEndsItOnce: the nodes run the release
// and the update was reported UpdatedInPlace, while the ObjectStore cache
// still holds the record of the update in flight. The next sync does not
// end the update a second time: one in_place update in the metric, one
// UpdatedInPlace Event.
func TestACacheBehindTheEndOfAnUpdateEndsItOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := record.NewFakeRecorder(100)
	clk := clocktesting.NewFakeClock(time.Now())
	f := newFixtureWith(t, func(c *Config) { c.Registerer, c.Recorder, c.Clock = reg, rec, clk }, fakeBinaries{}, tenantStore("t", "tenant"))
	f.lead(t)
	ctx := t.Context()

	f.dryRun(t, "t", "tenant")
	require.NoError(t, f.c.sync(ctx, "t/tenant"))
	f.waitCallDone(t, "t/tenant")
	a := f.admin("t", "tenant")
	a.mu.Lock()
	a.releases = []string{relNew, relNew, relNew, relNew}
	a.mu.Unlock()
	f.catchUp(t, "t", "tenant")
	require.NoError(t, f.c.sync(ctx, "t/tenant"))
	require.Equal(t, ReasonUpdatedInPlace, conditionOf(f.live(t, "t", "tenant")).Reason)

	// The cache still holds the update in flight; a later moment.
	cached, _, _ := f.stores.GetByKey("t/tenant")
	require.NotNil(t, objstatus.ObjectStore(cached.(*unstructured.Unstructured)).Status.Update)
	clk.Step(5 * time.Second)
	require.NoError(t, f.c.sync(ctx, "t/tenant"))

	assert.Equal(t, 1.0, promtest.ToFloat64(f.c.metrics.updates.WithLabelValues(outcomeInPlace)), "one update, ended once")
	var ended int
	for _, e := range events(rec) {
		if strings.Contains(e, ReasonUpdatedInPlace) {
			ended++
		}
	}
	assert.Equal(t, 1, ended, "one UpdatedInPlace Event")
	st := f.live(t, "t", "tenant")
	assert.Equal(t, ReasonUpdatedInPlace, conditionOf(st).Reason)
	assert.Nil(t, st.Status.Update)
}

// TestAnImageClearedUnderTheSyncRollsNothing: the cache still has the
// image and the sync decides to roll; the live object has no image any
// more. Nothing is rolled: an ObjectStore without an image has nothing to
// update, whichever read shows it.
func TestAnImageClearedUnderTheSyncRollsNothing(t *testing.T) {
	f := newFixture(t, fakeBinaries{}, tenantStore("t", "tenant"))
	f.admin("t", "tenant").releases = []string{relNewer, relNewer, relNewer, relNewer}
	f.lead(t)
	obj, err := f.dyn.Tracker().Get(v1.Resource, "t", "tenant")
	require.NoError(t, err)
	cleared := obj.(*unstructured.Unstructured).DeepCopy()
	require.NoError(t, unstructured.SetNestedField(cleared.Object, "", "spec", "image"))
	testutil.BumpResourceVersion(cleared)
	require.NoError(t, f.dyn.Tracker().Update(v1.Resource, cleared, "t"))

	require.NoError(t, f.c.sync(t.Context(), "t/tenant"))
	set, err := f.kube.AppsV1().StatefulSets("t").Get(t.Context(), "tenant-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "minio/aistor:old", set.Spec.Template.Spec.Containers[0].Image, "not rolled to an empty image")
}
