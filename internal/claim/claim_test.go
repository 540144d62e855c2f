package claim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cluster is a fake apiserver holding NamespaceClaims.
type cluster struct {
	t      *testing.T
	client *dynamicfake.FakeDynamicClient
}

func newCluster(t *testing.T) *cluster {
	return &cluster{t: t, client: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{Resource: "NamespaceClaimList"})}
}

// claim makes the claim of the install in ns, created at (seconds after
// epoch), watching namespaces (none: every namespace), as the chart does.
func (c *cluster) claim(ns string, at int, namespaces ...string) {
	c.t.Helper()
	_, err := c.client.Resource(Resource).Create(c.t.Context(), object(ns, at, namespaces...), metav1.CreateOptions{})
	require.NoError(c.t, err)
}

func object(ns string, at int, namespaces ...string) *unstructured.Unstructured {
	list := []any{}
	for _, n := range namespaces {
		list = append(list, n)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "aistor.min.io/v1", "kind": "NamespaceClaim",
		"metadata": map[string]any{"name": ns},
		"spec":     map[string]any{"install": "object-store-operator", "namespaces": list},
	}}
	u.SetCreationTimestamp(metav1.NewTime(epoch.Add(time.Duration(at) * time.Second)))
	return u
}

func (c *cluster) remove(ns string) {
	c.t.Helper()
	require.NoError(c.t, c.client.Resource(Resource).Delete(c.t.Context(), ns, metav1.DeleteOptions{}))
}

// install is a running Keeper.
type install struct {
	k   *Keeper
	reg *prometheus.Registry
}

func (c *cluster) install(ns string, namespaces ...string) *install {
	c.t.Helper()
	reg := prometheus.NewRegistry()
	k, err := New(Config{Client: c.client, Namespace: ns, Install: "object-store-operator", Namespaces: namespaces, Registerer: reg, Log: zerolog.Nop()})
	require.NoError(c.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(c.t, k.Run(ctx))
	}()
	c.t.Cleanup(func() { cancel(); <-done })
	return &install{k: k, reg: reg}
}

// holds waits for whether i holds its namespaces to be want.
func (i *install) holds(t *testing.T, want bool) error {
	t.Helper()
	require.Eventually(t, func() bool {
		err := i.k.Ready()
		return (err == nil) == want && (want || !strings.HasPrefix(err.Error(), "reading the NamespaceClaims"))
	}, 5*time.Second, time.Millisecond)
	held := 0.0
	if want {
		held = 1
	}
	assert.Equal(t, held, testutil.ToFloat64(i.k.held))
	return i.k.Ready()
}

func TestDisjointInstallsBothHoldTheirNamespaces(t *testing.T) {
	c := newCluster(t)
	c.claim("ops-a", 1, "tenant-a")
	c.claim("ops-b", 2, "tenant-b")
	c.install("ops-a", "tenant-a").holds(t, true)
	c.install("ops-b", "tenant-b").holds(t, true)
}

func TestAnOverlappingYoungerInstallIsRefusedUntilTheOlderGoes(t *testing.T) {
	c := newCluster(t)
	c.claim("ops-a", 1, "tenant-a", "tenant-x")
	c.claim("ops-c", 2, "tenant-x", "tenant-a", "tenant-c")
	a, younger := c.install("ops-a", "tenant-a", "tenant-x"), c.install("ops-c", "tenant-x", "tenant-c", "tenant-a")
	a.holds(t, true)
	err := younger.holds(t, false)
	assert.EqualError(t, err, "refused: install ops-a/object-store-operator (NamespaceClaim ops-a, watching namespaces tenant-a, tenant-x) "+
		"claimed namespaces tenant-a, tenant-x first; this install (watching namespaces tenant-a, tenant-c, tenant-x) reconciles nothing while that claim exists: "+
		"give each install its own watchNamespaces; if that install is gone (its namespace deleted without helm uninstall), remove its claim: kubectl delete namespaceclaim ops-a")

	c.remove("ops-a") // helm uninstall
	younger.holds(t, true)
}

func TestClusterWideAndNamespacedInstallsRefuseEachOther(t *testing.T) {
	for _, older := range []string{"wide", "scoped"} {
		t.Run(older+" first", func(t *testing.T) {
			c := newCluster(t)
			wideAt, scopedAt := 1, 2
			if older == "scoped" {
				wideAt, scopedAt = 2, 1
			}
			c.claim("ops-wide", wideAt)
			c.claim("ops-scoped", scopedAt, "tenant-a")
			wide, scoped := c.install("ops-wide"), c.install("ops-scoped", "tenant-a")
			if older == "wide" {
				wide.holds(t, true)
				assert.ErrorContains(t, scoped.holds(t, false), "install ops-wide/object-store-operator (NamespaceClaim ops-wide, watching every namespace) claimed namespaces tenant-a first")
			} else {
				scoped.holds(t, true)
				assert.ErrorContains(t, wide.holds(t, false), "claimed namespaces tenant-a first; this install (watching every namespace)")
			}
		})
	}
}

func TestTwoClaimsOfOneSecondAreOrderedByName(t *testing.T) {
	c := newCluster(t)
	c.claim("ops-b", 1)
	c.claim("ops-a", 1)
	c.install("ops-a").holds(t, true)
	assert.ErrorContains(t, c.install("ops-b").holds(t, false), "NamespaceClaim ops-a")
}

func TestAnInstallWithoutItsClaimStartsNothingAndSaysWhy(t *testing.T) {
	c := newCluster(t)
	i := c.install("ops", "tenant-a")
	assert.ErrorContains(t, i.holds(t, false), "no NamespaceClaim ops: the chart makes it")
	c.claim("ops", 1, "tenant-a")
	i.holds(t, true)
}

func TestAClaimListingOtherNamespacesIsNotHeld(t *testing.T) {
	c := newCluster(t)
	c.claim("ops", 1, "tenant-a")
	assert.ErrorContains(t, c.install("ops", "tenant-a", "tenant-b").holds(t, false),
		"NamespaceClaim ops lists namespaces tenant-a but this install watches namespaces tenant-a, tenant-b")
}

// An older install changed to overlap a younger one (its claim rewritten
// by helm upgrade): the younger stops, saying why.
func TestWhileHeldEndsWhenAnOlderClaimComesToOverlap(t *testing.T) {
	c := newCluster(t)
	c.claim("ops-a", 1, "tenant-a")
	c.claim("ops-b", 2, "tenant-b")
	b := c.install("ops-b", "tenant-b")
	returned := make(chan error)
	started := make(chan struct{})
	go func() {
		returned <- b.k.WhileHeld(t.Context(), func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return nil
		})
	}()
	<-started
	_, err := c.client.Resource(Resource).Update(t.Context(), object("ops-a", 1, "tenant-a", "tenant-b"), metav1.UpdateOptions{})
	require.NoError(t, err)
	select {
	case err := <-returned:
		assert.ErrorContains(t, err, "stopped reconciling: refused: install ops-a/object-store-operator")
	case <-time.After(5 * time.Second):
		t.Fatal("WhileHeld did not end")
	}
}

func TestWhileHeldWaitsForTheClaimAndEndsWithItsContext(t *testing.T) {
	c := newCluster(t)
	i := c.install("ops")
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	returned := make(chan error)
	go func() {
		returned <- i.k.WhileHeld(ctx, func(ctx context.Context) error {
			close(ran)
			<-ctx.Done()
			return errors.New("fn's own")
		})
	}()
	select {
	case <-ran:
		t.Fatal("ran without a claim")
	case <-time.After(50 * time.Millisecond):
	}
	c.claim("ops", 1)
	<-ran
	cancel()
	assert.EqualError(t, <-returned, "fn's own")
}

func TestLongConflictMessagesAreBounded(t *testing.T) {
	var many []string
	for n := range 25 {
		many = append(many, fmt.Sprintf("tenant-%02d", n))
	}
	c := newCluster(t)
	c.claim("ops-a", 1, many...)
	c.claim("ops-b", 2, many...)
	err := c.install("ops-b", many...).holds(t, false)
	assert.Contains(t, err.Error(), "tenant-09 and 15 more")
	assert.NotContains(t, err.Error(), "tenant-10")
}
