package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/mountsecret"
)

// restarting tells whether a StatefulSet is rolling its pods or has one
// not ready: what an SRE counts as a tenant restarting.
func restarting(s *appsv1.StatefulSet) bool {
	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	return s.Status.ObservedGeneration < s.Generation || s.Status.UpdatedReplicas != replicas ||
		s.Status.ReadyReplicas != replicas || s.Status.CurrentRevision != s.Status.UpdateRevision
}

// TestASharedCARotationRestartsTheFleetFiveAtATime: fifty tenants trust
// one CA; it is rotated. With OPERATOR_MAX_CONCURRENT_RESTARTS=5 never
// more than five tenants restart at once, every tenant gets one Event for
// its restart, and the paused tenants' Secrets and pods are untouched.
func TestASharedCARotationRestartsTheFleetFiveAtATime(t *testing.T) {
	t.Parallel()
	const tenants, paused, limit = 50, 5, 5
	ensureCRD(t)
	opNS, ns := operatorNamespace(t), operatorNamespace(t)
	newCA := func() {
		ca, _, _ := testutil.KeyPair(t, nil, []string{"shared-ca"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		putNamedSecret(t, ns, "shared-ca", map[string][]byte{"ca.crt": ca})
	}
	newCA()
	name := func(i int) string { return fmt.Sprintf("t-%02d", i) }
	isPaused := func(i int) bool { return i >= tenants-paused }
	for i := range tenants {
		tenantStatefulSet(t, ns, name(i), 1, "minio")
		applyYAML(t, objectStoreYAML(ns, name(i), nil, nil, []string{"shared-ca"}))
		if isPaused(i) {
			kubectl(t, "annotate", "objectstore", name(i), "-n", ns, apiv1.RestartsPausedAnnotation+"=true")
		}
	}
	sets := func() []appsv1.StatefulSet {
		list, err := adminClient(t).AppsV1().StatefulSets(ns).List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		return list.Items
	}
	// The tenants' first pods run before the operator starts: what rolls
	// from then on, the operator rolled.
	require.Eventually(t, func() bool {
		for _, s := range sets() {
			if restarting(&s) {
				return false
			}
		}
		return true
	}, 2*time.Minute, 50*time.Millisecond, "the tenants' first pods are ready")
	// Its own namespace only: the test runs beside others.
	startOperator(t, k8sEnv(opNS, fmt.Sprintf("OPERATOR_MAX_CONCURRENT_RESTARTS=%d", limit), "OPERATOR_WATCH_NAMESPACES="+ns))

	// settledOn waits until every unpaused tenant mounts the CA hash and
	// has its pods ready, sampling how many restart at once.
	settledOn := func(what string) int {
		most := 0
		require.Eventually(t, func() bool {
			now, done := 0, 0
			for _, s := range sets() {
				if restarting(&s) {
					now++
				} else if s.Spec.Template.Annotations[mountsecret.RestartAnnotation] != "" {
					done++
				}
			}
			most = max(most, now)
			return done == tenants-paused && now == 0
		}, 3*time.Minute, 20*time.Millisecond, what)
		return most
	}
	most := settledOn("the first restarts, as the tenants' generated Secrets are created")
	assert.LessOrEqual(t, most, limit)

	restartOf := map[string]string{}
	before := map[string]string{}
	for _, s := range sets() {
		restartOf[s.Name] = s.Spec.Template.Annotations[mountsecret.RestartAnnotation]
	}
	for i := range tenants {
		g, err := generated(t, ns, name(i))
		require.NoError(t, err, "every tenant's generated Secret exists, paused ones too: pods cannot start without it")
		before[name(i)] = g.Annotations[mountsecret.HashAnnotation]
		if isPaused(i) {
			assert.Empty(t, restartOf[poolName(name(i))], "a paused tenant's pods are not restarted")
			assert.Equal(t, mountsecret.ReasonRestartsPaused, condition(t, ns, name(i)).Reason)
		}
	}

	start := time.Now()
	newCA()
	// Wait for every unpaused tenant to restart onto the new CA.
	most = 0
	require.Eventually(t, func() bool {
		now, rotated := 0, 0
		for _, s := range sets() {
			if restarting(&s) {
				now++
			}
			if v := s.Spec.Template.Annotations[mountsecret.RestartAnnotation]; v != restartOf[s.Name] && !restarting(&s) {
				rotated++
			}
		}
		most = max(most, now)
		return rotated == tenants-paused
	}, 3*time.Minute, 20*time.Millisecond, "every unpaused tenant restarts onto the new CA")
	t.Logf("a CA shared by %d tenants rotated: all restarted in %s, at most %d at once", tenants-paused,
		time.Since(start).Round(time.Millisecond), most)
	assert.LessOrEqual(t, most, limit, "never more than OPERATOR_MAX_CONCURRENT_RESTARTS restarting")
	assert.Greater(t, most, 0)

	for i := range tenants {
		g, err := generated(t, ns, name(i))
		require.NoError(t, err)
		if isPaused(i) {
			assert.Equal(t, before[name(i)], g.Annotations[mountsecret.HashAnnotation], "%s: a paused tenant's Secret is untouched", name(i))
			assert.Empty(t, restartValue(t, ns, name(i)), "%s: and so are its pods", name(i))
			c := condition(t, ns, name(i))
			assert.Equal(t, mountsecret.ReasonRestartsPaused, c.Reason)
			assert.Contains(t, c.Message, "shared-ca", "the held change is named")
		} else {
			assert.NotEqual(t, before[name(i)], g.Annotations[mountsecret.HashAnnotation], name(i))
		}
	}

	// One Event per restart: the first one and the rotation's. Events
	// are written after the restarts, so the count is waited for; every
	// tenant still off is named each time, so a failure tells a late
	// Event (one short, then right) from an extra one (too many, to the
	// end).
	require.Eventually(t, func() bool {
		events, err := adminClient(t).CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", "Restarting").String()})
		if err != nil { // off the test goroutine: no require here
			t.Logf("list Events: %v", err)
			return false
		}
		per := map[string]int32{}
		for _, e := range events.Items {
			per[e.InvolvedObject.Name] += max(e.Count, 1)
		}
		var off []string
		for i := range tenants {
			want := int32(2)
			if isPaused(i) {
				want = 0
			}
			if per[name(i)] != want {
				off = append(off, fmt.Sprintf("%s: %d restart Events, want %d", name(i), per[name(i)], want))
			}
		}
		if len(off) > 0 {
			t.Logf("%s", strings.Join(off, "; "))
		}
		return len(off) == 0
	}, 10*time.Second, 100*time.Millisecond, "one Restarting Event per restart, none for a paused tenant")

	// Lifting the pause restarts the held tenant onto the current CA.
	kubectl(t, "annotate", "objectstore", name(tenants-1), "-n", ns, apiv1.RestartsPausedAnnotation+"-")
	require.Eventually(t, func() bool {
		g, err := generated(t, ns, name(tenants-1))
		return err == nil && g.Annotations[mountsecret.HashAnnotation] != before[name(tenants-1)] &&
			restartValue(t, ns, name(tenants-1)) != "" && condition(t, ns, name(tenants-1)).Reason == "CertificatesAssembled"
	}, 30*time.Second, 50*time.Millisecond, "the pause lifted, the tenant restarts")
}
