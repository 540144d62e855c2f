package trustbundle

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/object-store-operator/operator/internal/testutil"
)

func TestParseAnchors(t *testing.T) {
	ca1, ca2 := testutil.NewCA(t, "one"), testutil.NewCA(t, "two")
	leaf := ca1.Leaf(t, "svc.ns.svc")
	leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]})
	withHeaders := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Comment": "x"}, Bytes: ca2.Cert.Raw})
	keyBlock := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("k")})
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name     string
		in       []byte
		want     []byte
		skipped  int
		errorHas string
	}{
		{"one CA", ca1.PEM, ca1.PEM, 0, ""},
		{"two CAs in order", cat(ca2.PEM, ca1.PEM), cat(ca2.PEM, ca1.PEM), 0, ""},
		{"a repeat is dropped", cat(ca1.PEM, ca1.PEM), ca1.PEM, 0, ""},
		{"headers are dropped", withHeaders, ca2.PEM, 0, ""},
		{"a leaf is left out", cat(leafPEM, ca1.PEM), ca1.PEM, 1, ""},
		{"a key is left out", cat(keyBlock, ca1.PEM), ca1.PEM, 1, ""},
		{"only a leaf", leafPEM, nil, 1, "not a CA certificate"},
		{"empty", nil, nil, 0, "no PEM certificate"},
		{"garbage", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), nil, 1, "not an X.509 certificate"},
		{"past 1 MiB", cat(ca1.PEM, []byte(strings.Repeat("x", MaxSize))), ca1.PEM, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParseAnchors(tt.in)
			assert.Len(t, a.Skipped, tt.skipped, "%v", a.Skipped)
			if tt.errorHas != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.errorHas)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, string(tt.want), a.PEM)
		})
	}
}

// fakeCA is a CASource whose bundle a test changes.
type fakeCA struct {
	mu      sync.Mutex
	pem     []byte
	changed chan struct{}
}

func (f *fakeCA) CABundle() []byte { f.mu.Lock(); defer f.mu.Unlock(); return f.pem }
func (f *fakeCA) Loaded() bool     { return f.CABundle() != nil }
func (f *fakeCA) set(b []byte) {
	f.mu.Lock()
	f.pem = b
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

var v1beta1 = schema.GroupVersionResource{Group: Group, Version: "v1beta1", Resource: Resource}

type fixture struct {
	kube    *kubefake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	ca      *fakeCA
	p       *Publisher
	logs    *testutil.LockedBuffer
	cancel  context.CancelFunc
	stopped chan struct{}
}

// newFixture starts a publisher for namespace ops, owner "osop-ops" when
// owner is set, against fake clients whose discovery serves resources.
func newFixture(t *testing.T, served []*metav1.APIResourceList, owner string, role *rbacv1.ClusterRole) *fixture {
	t.Helper()
	f := &fixture{kube: kubefake.NewClientset(), ca: &fakeCA{changed: make(chan struct{}, 1)}, logs: &testutil.LockedBuffer{}}
	if role != nil {
		f.kube = kubefake.NewClientset(role)
	}
	f.kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = served
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		v1beta1: "ClusterTrustBundleList", {Group: Group, Version: "v1", Resource: Resource}: "ClusterTrustBundleList",
	})
	// The fake cannot apply: store the applied object whole, as the
	// apiserver would for the one field manager that writes it.
	f.dyn.PrependReactor("patch", Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		var u unstructured.Unstructured
		if err := json.Unmarshal(p.GetPatch(), &u.Object); err != nil {
			return true, nil, err
		}
		old, err := f.dyn.Tracker().Get(p.GetResource(), "", p.GetName())
		if apierrors.IsNotFound(err) {
			u.SetResourceVersion("1")
			return true, &u, f.dyn.Tracker().Create(p.GetResource(), &u, "")
		}
		u.SetResourceVersion(old.(*unstructured.Unstructured).GetResourceVersion())
		testutil.BumpResourceVersion(&u)
		return true, &u, f.dyn.Tracker().Update(p.GetResource(), &u, "")
	})
	// The fake's watch does not resume from the list's resourceVersion:
	// a write between the informer's list and its watch is never seen.
	// Tests start changing things once the watch is open, as a real
	// apiserver's watch would have caught up anyway.
	watching := make(chan struct{})
	f.dyn.PrependWatchReactor(Resource, func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := f.dyn.Tracker().Watch(a.GetResource(), a.GetNamespace())
		close(watching)
		return true, w, err
	})
	var err error
	f.p, err = New(Config{Kube: f.kube, Dynamic: f.dyn, Namespace: "ops", Owner: owner, Source: f.ca, Changed: f.ca.changed,
		Log: zerolog.New(f.logs)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	f.cancel, f.stopped = cancel, make(chan struct{})
	go func() {
		defer close(f.stopped)
		_ = f.p.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-f.stopped })
	if servesBundles(served) {
		select {
		case <-watching:
		case <-time.After(10 * time.Second):
			t.Fatal("the publisher never watched its ClusterTrustBundle")
		}
	}
	return f
}

func servesBundles(served []*metav1.APIResourceList) bool {
	for _, l := range served {
		for _, r := range l.APIResources {
			if r.Name == Resource {
				return true
			}
		}
	}
	return false
}

func (f *fixture) applies() int {
	n := 0
	for _, a := range f.dyn.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

func (f *fixture) stored(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	obj, err := f.dyn.Tracker().Get(v1beta1, "", Name("ops"))
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return obj.(*unstructured.Unstructured)
}

func (f *fixture) waitBundle(t *testing.T, want []byte) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	require.Eventually(t, func() bool {
		if u = f.stored(t); u == nil {
			return false
		}
		got, _, _ := unstructured.NestedString(u.Object, "spec", "trustBundle")
		return got == string(want)
	}, 5*time.Second, 5*time.Millisecond)
	return u
}

var servesV1beta1 = []*metav1.APIResourceList{
	{GroupVersion: "certificates.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "certificatesigningrequests"}}},
	{GroupVersion: "certificates.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "clustertrustbundles"}}},
}

func TestNotServedNothingAttempted(t *testing.T) {
	f := newFixture(t, []*metav1.APIResourceList{
		{GroupVersion: "certificates.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "certificatesigningrequests"}}},
	}, "", nil)
	f.ca.set(testutil.NewCA(t, "ca").PEM)
	// Run returns on its own: nothing waits for a bundle.
	select {
	case <-f.stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return where ClusterTrustBundles are not served")
	}
	assert.Empty(t, f.dyn.Actions(), "no request on ClusterTrustBundles")
	assert.Equal(t, 1, strings.Count(f.logs.String(), "\n"), "one line: %s", f.logs.String())
	assert.Contains(t, f.logs.String(), `"level":"info"`)
}

func TestPublishesFollowsTheCAAndWritesOnlyChanges(t *testing.T) {
	// In a bubble: "writes nothing" is counted once every goroutine is
	// idle. A second write right after the first is the publisher's
	// right (its cache had not seen the first yet), not one to count.
	synctest.Test(t, testPublishesFollowsTheCAAndWritesOnlyChanges)
}

func testPublishesFollowsTheCAAndWritesOnlyChanges(t *testing.T) {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "osop-ops", UID: "role-uid"}}
	f := newFixture(t, servesV1beta1, "osop-ops", role)
	one, two := testutil.NewCA(t, "one"), testutil.NewCA(t, "two")
	leaf := one.Leaf(t, "svc.ops.svc")
	f.ca.set(append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}), one.PEM...))

	u := f.waitBundle(t, one.PEM)
	assert.Equal(t, "certificates.k8s.io/v1beta1", u.GetAPIVersion())
	assert.Equal(t, "aistor.min.io:object-store-operator:ops", u.GetName())
	signer, _, _ := unstructured.NestedString(u.Object, "spec", "signerName")
	assert.Equal(t, SignerName, signer)
	assert.Equal(t, map[string]string{NamespaceLabel: "ops", "app.kubernetes.io/managed-by": "object-store-operator"}, u.GetLabels())
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "osop-ops", UID: "role-uid"}},
		u.GetOwnerReferences())
	require.Eventually(t, func() bool { return strings.Contains(f.p.Problem(), "not a CA certificate") }, 5*time.Second, time.Millisecond,
		"the leaf left out is named")

	// The same CA again writes nothing; a new CA is written once.
	synctest.Wait()
	require.Equal(t, f.stored(t).GetResourceVersion(), f.p.cached().GetResourceVersion(), "the cache holds what was written")
	writes := f.applies()
	f.ca.set(one.PEM)
	synctest.Wait()
	assert.Equal(t, writes, f.applies(), "the same CA again")
	f.ca.set(two.PEM)
	f.waitBundle(t, two.PEM)
	synctest.Wait()
	assert.Equal(t, writes+1, f.applies(), "a new CA")

	// Deleted by someone: made again.
	require.NoError(t, f.dyn.Tracker().Delete(v1beta1, "", Name("ops")))
	f.waitBundle(t, two.PEM)
}

func TestOwnerMissingPublishesNothing(t *testing.T) {
	f := newFixture(t, servesV1beta1, "osop-ops", nil)
	f.ca.set(testutil.NewCA(t, "ca").PEM)
	require.Eventually(t, func() bool { return strings.Contains(f.p.Problem(), "its owner is missing") }, 5*time.Second, 5*time.Millisecond)
	f.ca.set(testutil.NewCA(t, "another").PEM)
	require.Eventually(t, func() bool { return f.p.queue.Len() == 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Zero(t, f.applies(), "a bundle without its owner would outlive the install")
	assert.Equal(t, "ClusterTrustBundle not published: its owner is missing: ClusterRole osop-ops not found", f.p.Problem())
	assert.Nil(t, f.stored(t))
	assert.Equal(t, 1, strings.Count(f.logs.String(), "its owner is missing"), "logged once while it stays")
}

func TestPrefersV1(t *testing.T) {
	f := newFixture(t, append([]*metav1.APIResourceList{
		{GroupVersion: "certificates.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "certificatesigningrequests"}, {Name: "clustertrustbundles"}}},
	}, servesV1beta1[1]), "", nil)
	ca := testutil.NewCA(t, "ca")
	f.ca.set(ca.PEM)
	gvr := schema.GroupVersionResource{Group: Group, Version: "v1", Resource: Resource}
	require.Eventually(t, func() bool {
		_, err := f.dyn.Tracker().Get(gvr, "", Name("ops"))
		return err == nil
	}, 5*time.Second, 5*time.Millisecond)
	obj, err := f.dyn.Tracker().Get(gvr, "", Name("ops"))
	require.NoError(t, err)
	assert.Equal(t, "certificates.k8s.io/v1", obj.(*unstructured.Unstructured).GetAPIVersion())
	assert.Empty(t, obj.(*unstructured.Unstructured).GetOwnerReferences(), "no owner set: none")
}
