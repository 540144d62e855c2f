package updates

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/secretcache"
)

// TestAnAPIErrorFindingThePodsEndpointDoesNotTakeItDown: a Service of
// nine slices with minio-pool-1-0 in the ninth. The second List, or the
// read of the Pod, fails with the 503 the apiserver gives while etcd
// changes leader. That is the operator's own hiccup, no MinIO it cannot
// ask: the pod waits (ErrNotNow), and would be asked again, rather than
// go on readiness alone while its own node says 412. (A hostile review
// found it taken down.)
func TestAnAPIErrorFindingThePodsEndpointDoesNotTakeItDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(cs *fake.Clientset)
	}{
		{"second page of EndpointSlices", func(cs *fake.Clientset) { pagedSlices(cs, 2) }},
		{"the Pod", func(cs *fake.Clientset) {
			pagedSlices(cs, 0)
			cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("etcdserver: leader changed")
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := pool1InTheNinthSlice()
			n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
			tn, cs := tenantAt(t, n, "http://minio.t.svc.cluster.local", objs...)
			tc.fail(cs)

			_, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
			rolloutDeletes := !errors.Is(err, ErrNotNow) // rollout/controller.go replace: nil or any other error takes the pod down
			assert.False(t, rolloutDeletes,
				"minio-pool-1-0's own node says 412; the operator failed to read the API (dialled %v), and the rollout would delete it: %v", n.asked, err)
		})
	}
}

// TestASlowAPIReadFindingThePodsEndpointDoesNotTakeItDown: a read of
// the API that hangs (the apiserver holds requests during an etcd leader
// change) outlives the check's deadline. resolve runs inside the
// transport's dial, and net/http then returns the request's error, not
// the dial's: no connection was begun, so nothing was asked, and the pod
// waits rather than go on readiness alone. Two reads: the Pod read of
// selects and the List of the Service's EndpointSlices. (A hostile
// review found the pod replaced.)
func TestASlowAPIReadFindingThePodsEndpointDoesNotTakeItDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		verb string
		res  string
	}{
		{"the Pod read of selects", "get", "pods"},
		{"the List of EndpointSlices", "list", "endpointslices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
			c, cs := tenantController(t, "")
			for _, o := range minioHL("minio-pool-0-0") {
				require.NoError(t, cs.Tracker().Add(o))
			}
			hang(t, cs, tc.verb, tc.res)
			tn, err := c.loadTenant(t.Context(), storeWithEndpoint("http://tenant-hl.t.svc.cluster.local:9000"))
			require.NoError(t, err)
			tn.dial = n.dial

			// The check's own deadline (maintenanceTimeout), shortened.
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			asked, err := tn.mayTakeDown(ctx, "minio-pool-1-0")
			rolloutDeletes := !errors.Is(err, ErrNotNow) // rollout/controller.go replace: nil or any other error takes the pod down
			assert.False(t, rolloutDeletes,
				"the operator's own API read hung past the check's deadline; nothing was asked (dialled %v), and the rollout would delete minio-pool-1-0 on readiness alone: cause %q, err %v (asked %q)",
				n.asked, reason.Of(err), err, asked)
		})
	}
}

// hang makes the first verb/res request of cs block until the test ends.
func hang(t *testing.T, cs *fake.Clientset, verb, res string) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	once := false
	cs.PrependReactor(verb, res, func(k8stesting.Action) (bool, runtime.Object, error) {
		if once {
			return false, nil, nil
		}
		once = true
		<-release
		return false, nil, nil
	})
}

// TestAnAPIErrorReadingTheTenantsCAsDoesNotTakeThePodDown: MayTakeDown
// first reads the tenant's CAs from the generated Secret through
// secretcache.Reader, which GETs it from the apiserver whenever the
// informer has a newer version than the data it keeps (a certificate
// restart is exactly when that Secret has just changed). That GET fails
// with the 503 of an etcd leader change: the pod waits, as for any read
// of the operator's own that fails. (A hostile review found it replaced
// on readiness alone.)
func TestAnAPIErrorReadingTheTenantsCAsDoesNotTakeThePodDown(t *testing.T) {
	c, cs := tenantController(t, "")
	for _, o := range minioHL("minio-pool-0-0", "minio-pool-1-0") {
		require.NoError(t, cs.Tracker().Add(o))
	}
	generated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: v1.GeneratedSecretName("tenant"), ResourceVersion: "2"}}
	require.NoError(t, cs.Tracker().Add(generated))
	// The informer has seen version 2 of the generated Secret; its data
	// was never read (or was kept at version 1): the Reader GETs it.
	meta := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, meta.Add(generated.DeepCopy()))
	c.cfg.Secrets = secretcache.NewReader(meta, cs, func(map[string][]byte) string { return "" }, secretcache.Limits{})
	cs.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == generated.Name {
			return true, nil, apierrors.NewServiceUnavailable("etcdserver: leader changed")
		}
		return false, nil, nil
	})

	store := storeWithEndpoint("http://tenant-hl.t.svc.cluster.local:9000")
	// c.MayTakeDown is what cmd/operator's maintenanceCheck calls; it
	// fails before anything is dialled.
	asked, err := c.MayTakeDown(t.Context(), store, "minio-pool-1-0")
	rolloutDeletes := !errors.Is(err, ErrNotNow) // rollout/controller.go replace: nil or any other error takes the pod down
	assert.False(t, rolloutDeletes,
		"the operator's own read of the generated Secret failed (503); nothing was asked, and the rollout would delete minio-pool-1-0 on readiness alone: cause %q, err %v (asked %q)",
		reason.Of(err), err, asked)
}

// TestANodeThatAcceptsAndNeverAnswersIsNotAWait: the pod's own node
// accepts the connection and never answers. A connection was begun, so
// MinIO was asked: that is a MinIO the operator cannot ask
// (CauseTenantUnreachable; the rollout goes on readiness alone, as
// documented), not a wait of the operator's own.
func TestANodeThatAcceptsAndNeverAnswersIsNotAWait(t *testing.T) {
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK})
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(release) })
	n.servers["10.0.0.6:9000"] = silent
	tn, _ := tenantAt(t, n, "http://tenant-hl.t.svc.cluster.local:9000", minioHL("minio-pool-0-0", "minio-pool-1-0")...)

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := tn.mayTakeDown(ctx, "minio-pool-1-0")
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNotNow), "MinIO was asked and said nothing: %v", err)
	assert.Equal(t, CauseTenantUnreachable, reason.Of(err))
	assert.Equal(t, []string{"10.0.0.6:9000"}, n.asked)
}

// TestASlowReadLeavesTheNodeItsTime: the operator's own reads to find
// the pod's endpoint are slow, not hung (they would finish before the
// check's deadline, as while etcd changes leader). They get half the
// check's time; past it the pod waits (nothing was asked), rather than
// leave its node, which answers 412 in 100 ms, no time and take that for
// its silence (readiness alone). (A hostile review found the pod
// replaced.)
func TestASlowReadLeavesTheNodeItsTime(t *testing.T) {
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK})
	// The pod's own node: a MinIO that answers 412 within 100 ms.
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(100 * time.Millisecond)
		w.WriteHeader(http.StatusPreconditionFailed)
	}))
	t.Cleanup(own.Close)
	n.servers["10.0.0.6:9000"] = own
	tn, cs := tenantAt(t, n, "http://tenant-hl.t.svc.cluster.local:9000", minioHL("minio-pool-0-0", "minio-pool-1-0")...)
	// checkPod's read of the Pod takes 900 ms of the check's 1 s
	// (maintenanceTimeout, scaled down tenfold): slow, not hung.
	cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		time.Sleep(900 * time.Millisecond)
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	asked, err := tn.mayTakeDown(ctx, "minio-pool-1-0")
	rolloutDeletes := !errors.Is(err, ErrNotNow) // rollout/controller.go replace: nil or any other error takes the pod down
	assert.False(t, rolloutDeletes,
		"the pod's own node answers 412 in 100 ms, but the operator's read took the check's time; the rollout deletes minio-pool-1-0 on readiness alone: cause %q, err %v (asked %q, dialled %v)",
		reason.Of(err), err, asked, n.asked)
}
