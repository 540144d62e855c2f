package claim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"
)

// api is a fake apiserver for Leases that sets what the real one sets:
// the creation time (by its clock, in whole seconds), a UID and a new
// resource version on every write. Its authorizer grants the claim to
// the ServiceAccount object-store-operator of every namespace a keeper
// was made in (as the chart's ClusterRoleBinding does), and counts the
// reviews.
type api struct {
	client   *fake.Clientset
	clock    *testclock.FakeClock
	mu       sync.Mutex
	rv       int
	installs map[string]bool
	reviews  int
}

func installUser(ns string) string { return "system:serviceaccount:" + ns + ":object-store-operator" }

func newAPI(t *testing.T) *api {
	a := &api{client: fake.NewClientset(), clock: testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	stamp := func(action k8stesting.Action) (bool, runtime.Object, error) {
		l := action.(interface{ GetObject() runtime.Object }).GetObject().(*coordinationv1.Lease)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.rv++
		l.ResourceVersion = fmt.Sprint(a.rv)
		if action.GetVerb() == "create" {
			l.CreationTimestamp = metav1.NewTime(a.clock.Now().Truncate(time.Second))
			l.UID = types.UID(fmt.Sprintf("uid-%d", a.rv))
		}
		return false, nil, nil
	}
	a.client.PrependReactor("create", "leases", stamp)
	a.client.PrependReactor("update", "leases", stamp)
	a.installs = map[string]bool{}
	a.client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		r := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.reviews++
		ra := r.Spec.ResourceAttributes
		for ns := range a.installs {
			r.Status.Allowed = r.Status.Allowed || (r.Spec.User == installUser(ns) && ra != nil && ra.Namespace == "" &&
				ra.Group == Group && ra.Resource == Resource && ra.Verb == Verb)
		}
		return true, r, nil
	})
	return a
}

func (a *api) keeper(t *testing.T, ns string, watch ...string) *Keeper {
	t.Helper()
	return a.replica(t, ns, ns+"-replica", watch...)
}

func (a *api) replica(t *testing.T, ns, identity string, watch ...string) *Keeper {
	t.Helper()
	a.mu.Lock()
	a.installs[ns] = true
	a.mu.Unlock()
	k, err := New(Config{
		Client: a.client, Namespace: ns, Install: "object-store-operator", Namespaces: watch,
		Identity: identity, User: installUser(ns), Duration: 30 * time.Second, Interval: 2 * time.Second, Clock: a.clock, Log: zerolog.Nop(),
	})
	require.NoError(t, err)
	return k
}

// step runs one check of every keeper, then moves the clock an Interval.
func (a *api) step(ctx context.Context, keepers ...*Keeper) {
	for _, k := range keepers {
		k.check(ctx)
	}
	a.clock.Step(2 * time.Second)
}

func TestDisjointInstallsBothHoldTheirNamespaces(t *testing.T) {
	a := newAPI(t)
	one, two := a.keeper(t, "ops-a", "tenant-a"), a.keeper(t, "ops-b", "tenant-b", "tenant-c")
	assert.ErrorContains(t, one.Ready(), "checking", "not ready before the first read")
	a.step(t.Context(), one, two)
	assert.Error(t, one.Ready(), "one clean read is not enough to act at start")
	a.step(t.Context(), one, two)
	assert.NoError(t, one.Ready())
	assert.NoError(t, two.Ready())

	l, err := a.client.CoordinationV1().Leases("ops-b").Get(t.Context(), LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "tenant-b,tenant-c", l.Annotations[NamespacesAnnotation])
	assert.Equal(t, "true", l.Labels[Label])
}

func TestAnOverlappingYoungerInstallIsRefusedUntilTheOlderGoes(t *testing.T) {
	a := newAPI(t)
	older := a.keeper(t, "ops-a", "tenant-a", "tenant-b")
	a.step(t.Context(), older)
	a.step(t.Context(), older)
	require.NoError(t, older.Ready())

	younger := a.keeper(t, "ops-c", "tenant-b", "tenant-x")
	for range 3 {
		a.step(t.Context(), older, younger)
	}
	err := younger.Ready()
	var c *Conflict
	require.ErrorAs(t, err, &c)
	assert.Equal(t, "ops-a/object-store-operator", c.Install)
	assert.Equal(t, []string{"tenant-b"}, c.Shared)
	assert.Contains(t, err.Error(), "refused: install ops-a/object-store-operator")
	assert.Contains(t, err.Error(), "namespaces tenant-b first")
	assert.NoError(t, older.Ready(), "the older install keeps its namespaces")

	// The older install stops: its claim is released, and the younger one
	// takes over after three clean reads.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	older.release(ctx)
	a.step(t.Context(), younger)
	a.step(t.Context(), younger)
	assert.Error(t, younger.Ready(), "two clean reads after a conflict are not enough")
	a.step(t.Context(), younger)
	assert.NoError(t, younger.Ready())
}

func TestAClaimNobodyRenewsLapses(t *testing.T) {
	a := newAPI(t)
	killed := a.keeper(t, "ops-a", "tenant-a")
	a.step(t.Context(), killed)
	next := a.keeper(t, "ops-b", "tenant-a")
	a.step(t.Context(), next)
	require.ErrorContains(t, next.Ready(), "ops-a/object-store-operator")
	// ops-a was killed: nothing renews its claim. After Duration without a
	// change, as ops-b's clock sees it, the claim is dead.
	for range 15 {
		a.step(t.Context(), next)
	}
	assert.Error(t, next.Ready())
	for range 3 {
		a.step(t.Context(), next)
	}
	assert.NoError(t, next.Ready())

	// ops-a comes back: its lapsed claim is made again, younger than
	// ops-b's, so ops-a is the one refused.
	a.step(t.Context(), killed, next)
	a.step(t.Context(), killed, next)
	assert.ErrorContains(t, killed.Ready(), "ops-b/object-store-operator")
	assert.NoError(t, next.Ready())
}

func TestClusterWideAndNamespacedInstallsRefuseEachOther(t *testing.T) {
	a := newAPI(t)
	ns := a.keeper(t, "ops-a", "tenant-a")
	a.step(t.Context(), ns)
	wide := a.keeper(t, "ops-wide")
	for range 3 {
		a.step(t.Context(), ns, wide)
	}
	assert.NoError(t, ns.Ready())
	assert.ErrorContains(t, wide.Ready(), "claimed namespaces tenant-a first", "a cluster-wide install next to another is refused")

	b := newAPI(t)
	wide = b.keeper(t, "ops-wide")
	b.step(t.Context(), wide)
	later := b.keeper(t, "ops-a", "tenant-a")
	for range 3 {
		b.step(t.Context(), wide, later)
	}
	assert.NoError(t, wide.Ready())
	assert.ErrorContains(t, later.Ready(), "watching every namespace", "and a namespaced one next to a cluster-wide one")

	c := newAPI(t)
	first, second := c.keeper(t, "ops-1"), c.keeper(t, "ops-2")
	for range 3 {
		c.step(t.Context(), first, second)
	}
	assert.NoError(t, first.Ready())
	assert.ErrorContains(t, second.Ready(), "claimed every namespace first", "two cluster-wide installs")
}

func TestChangingTheNamespacesMakesTheClaimYounger(t *testing.T) {
	a := newAPI(t)
	one := a.keeper(t, "ops-a", "tenant-a")
	a.step(t.Context(), one)
	two := a.keeper(t, "ops-b", "tenant-b")
	for range 3 {
		a.step(t.Context(), one, two)
	}
	require.NoError(t, one.Ready())
	require.NoError(t, two.Ready())
	// ops-a is reconfigured to take tenant-b too: it does not overtake
	// ops-b, which holds tenant-b.
	one = a.keeper(t, "ops-a", "tenant-a", "tenant-b")
	for range 3 {
		a.step(t.Context(), one, two)
	}
	assert.ErrorContains(t, one.Ready(), "ops-b/object-store-operator")
	assert.NoError(t, two.Ready())
}

func TestWhileHeldEndsTheTermWhenAnOlderClaimAppears(t *testing.T) {
	a := newAPI(t)
	k := a.keeper(t, "ops-b", "tenant-a")
	a.step(t.Context(), k)
	a.step(t.Context(), k)
	require.NoError(t, k.Ready())

	terms := make(chan context.Context, 4)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		done <- k.WhileHeld(ctx, func(term context.Context) error {
			terms <- term
			<-term.Done()
			return nil
		})
	}()
	first := <-terms

	// A claim older than this one's (its install started a moment before
	// and its first write was slow to show).
	a.installs["ops-a"] = true
	hold := "ops-a-replica"
	_, err := a.client.CoordinationV1().Leases("ops-a").Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName, Namespace: "ops-a", Labels: map[string]string{Label: "true"},
			Annotations: map[string]string{NamespacesAnnotation: "tenant-a", InstallAnnotation: "object-store-operator", UserAnnotation: installUser("ops-a")}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &hold},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	older, err := a.client.CoordinationV1().Leases("ops-a").Get(t.Context(), LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	older.CreationTimestamp = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	_, err = a.client.CoordinationV1().Leases("ops-a").Update(t.Context(), older, metav1.UpdateOptions{})
	require.NoError(t, err)

	a.step(t.Context(), k)
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the term did not end when the older claim appeared")
	}
	assert.ErrorContains(t, k.Ready(), "ops-a")

	require.NoError(t, a.client.CoordinationV1().Leases("ops-a").Delete(t.Context(), LeaseName, metav1.DeleteOptions{}))
	for range 3 {
		a.step(t.Context(), k)
	}
	select {
	case <-terms:
	case <-time.After(10 * time.Second):
		t.Fatal("no new term once the claim is held again")
	}
	cancel()
	require.NoError(t, <-done)
}

func TestOtherLeasesAreNotClaims(t *testing.T) {
	a := newAPI(t)
	holder := "someone"
	// The fake ignores field selectors; the real apiserver lists only
	// claims. Either way a leader-election Lease is not a claim.
	_, err := a.client.CoordinationV1().Leases("kube-system").Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager", Namespace: "kube-system", Labels: map[string]string{Label: "true"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	a.clock.Step(time.Second)
	k := a.keeper(t, "ops-a")
	a.step(t.Context(), k)
	a.step(t.Context(), k)
	assert.NoError(t, k.Ready())
}

func TestLongConflictMessagesAreBounded(t *testing.T) {
	var many []string
	for i := range 500 {
		many = append(many, fmt.Sprintf("tenant-%03d", i))
	}
	c := &Conflict{Install: "ops/x", Lease: "ops/" + LeaseName, Shared: many, Theirs: strings.Join(many, ","), ours: All}
	assert.Less(t, len(c.Error()), 1000)
	assert.Contains(t, c.Error(), "and 490 more")
}

func TestAReplicaStoppingKeepsItsInstallsClaim(t *testing.T) {
	a := newAPI(t)
	r1, r2 := a.replica(t, "ops-a", "r1", "tenant-a"), a.replica(t, "ops-a", "r2", "tenant-a")
	for range 2 {
		a.step(t.Context(), r1, r2)
	}
	require.NoError(t, r1.Ready())
	require.NoError(t, r2.Ready())
	other := a.keeper(t, "ops-b", "tenant-a")
	for range 3 {
		a.step(t.Context(), r1, r2, other)
	}
	require.Error(t, other.Ready())

	// A rolling update: the replica that renewed last stops and releases
	// the claim; the other renews it again, and the other install never
	// acts in between.
	l, err := a.client.CoordinationV1().Leases("ops-a").Get(t.Context(), LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	stopping, survivor := r1, r2
	if *l.Spec.HolderIdentity == "r2" {
		stopping, survivor = r2, r1
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	stopping.release(ctx)
	l, err = a.client.CoordinationV1().Leases("ops-a").Get(t.Context(), LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, *l.Spec.HolderIdentity, "released")
	for range 10 {
		a.step(t.Context(), survivor, other)
		assert.Error(t, other.Ready(), "the other install waits while a replica of the first runs")
	}
	assert.NoError(t, survivor.Ready())
}

func TestAClaimThatLostItsLabelIsLabelledAgain(t *testing.T) {
	a := newAPI(t)
	k := a.keeper(t, "ops-a", "tenant-a")
	a.step(t.Context(), k)
	l, err := a.client.CoordinationV1().Leases("ops-a").Get(t.Context(), LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	delete(l.Labels, Label)
	_, err = a.client.CoordinationV1().Leases("ops-a").Update(t.Context(), l, metav1.UpdateOptions{})
	require.NoError(t, err)
	a.step(t.Context(), k)
	a.step(t.Context(), k)
	assert.NoError(t, k.Ready())
	l, err = a.client.CoordinationV1().Leases("ops-a").Get(t.Context(), LeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", l.Labels[Label], "others find it again")
}

// TestAHeldClaimIsReadEveryQuarterOfItsDuration: until it holds its
// namespaces an install reads the claims every Interval; holding them,
// every quarter of Duration (an idle fleet's fixed cost on the
// apiserver), and its claim stays live to the others all the same.
func TestAHeldClaimIsReadEveryQuarterOfItsDuration(t *testing.T) {
	a := newAPI(t)
	k := a.keeper(t, "ops-a", "tenant-a")
	other := a.keeper(t, "ops-b", "tenant-b")
	assert.True(t, k.due(time.Time{}), "the first read is at once")
	last := a.clock.Now()
	a.step(t.Context(), k)
	assert.True(t, k.due(last), "not held yet: read again after an Interval")
	for range 2 {
		a.step(t.Context(), k, other)
	}
	require.NoError(t, k.Ready())

	for range 20 { // 2.5 minutes
		last = a.clock.Now()
		k.check(t.Context())
		other.check(t.Context())
		require.NoError(t, k.Ready())
		a.clock.Step(2 * time.Second)
		assert.False(t, k.due(last), "held: not read again after an Interval")
		a.clock.Step(5500 * time.Millisecond)
		assert.True(t, k.due(last), "held: read again after a quarter of the claim's 30 s")
		own, err := a.client.CoordinationV1().Leases("ops-a").Get(t.Context(), LeaseName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.LessOrEqual(t, a.clock.Since(own.Spec.RenewTime.Time), 30*time.Second/2, "renewed well within its duration")
	}
}
