package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/test/cluster"
)

// fleetTenant is one more tenant of an updateEnv's operator: an
// ObjectStore alone in its namespace, with a single-node MinIO on the
// older release.
type fleetTenant struct {
	ns, store string
	minio     *minioCluster
}

// addTenant adds a tenant whose MinIO runs with minioEnv.
func (e *updateEnv) addTenant(t testing.TB, minioEnv ...string) *fleetTenant {
	t.Helper()
	return e.addTenantOn(t, freePorts(t, 1)[0], minioEnv...)
}

// addTenantOn is addTenant with MinIO on port (tenants added at once take
// their ports from one freePorts call, so no two get the same).
func (e *updateEnv) addTenantOn(t testing.TB, port int, minioEnv ...string) *fleetTenant {
	t.Helper()
	ft := &fleetTenant{ns: e.takeNamespace(t), store: "tenant"}
	dockerConfigSecret(t, ft.ns, "regcred", e.reg.host, e.reg.user, e.reg.pass)
	now := time.Now()
	srvCert, srvKey, _ := testutil.KeyPair(t, nil, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(24*time.Hour))
	putNamedSecret(t, ft.ns, "tenant-tls", map[string][]byte{"tls.crt": srvCert, "tls.key": srvKey, "ca.crt": srvCert})
	putNamedSecret(t, ft.ns, "tenant-env", map[string][]byte{apiv1.ConfigEnvKey: []byte(
		"export MINIO_ROOT_USER=tenant-admin\nexport MINIO_ROOT_PASSWORD=tenant-secret-123\n")})
	applyYAML(t, fmt.Sprintf(`apiVersion: aistor.min.io/v1
kind: ObjectStore
metadata:
  name: %s
  namespace: %s
spec:
  image: %s
  imagePullSecrets:
    - name: regcred
  certificates:
    server:
      - name: tenant-tls
  configuration:
    name: tenant-env
  updates:
    endpoint: https://127.0.0.1:%d
`, ft.store, ft.ns, e.oldImage, port))
	tenantStatefulSet(t, ft.ns, ft.store, 1, e.oldImage)
	var gen *corev1.Secret
	require.Eventually(t, func() bool {
		var err error
		gen, err = generated(t, ft.ns, ft.store)
		return err == nil && len(gen.Data["CAs.operator.crt"]) > 0
	}, 30*time.Second, 50*time.Millisecond, "the generated Secret with the operator's CA")
	certs := cluster.MinIOCertsDir(gen.Data)
	roots := e.roots.Clone()
	roots.AppendCertsFromPEM(srvCert)
	ft.minio = startMinIO(t, []int{port}, []string{e.older}, certs, roots, minioEnv...)
	return ft
}

func (ft *fleetTenant) setImage(t testing.TB, image string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"image":%q}}`, image)
	_, err := dyn(t).Resource(apiv1.Resource).Namespace(ft.ns).Patch(t.Context(), ft.store, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

func (ft *fleetTenant) version(t testing.TB) metav1.Condition {
	return conditionOf(t, ft.ns, ft.store, apiv1.ConditionVersionCurrent)
}

// eventReasons lists the reasons of the Events on the tenant's ObjectStore.
func (ft *fleetTenant) eventReasons(t testing.TB) []string {
	t.Helper()
	list, err := adminClient(t).CoreV1().Events(ft.ns).List(t.Context(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=ObjectStore,involvedObject.name=" + ft.store})
	require.NoError(t, err)
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Type+" "+ev.Reason)
	}
	return out
}

// TestAReleaseFailingInPlaceHaltsAfterTheBudget: four tenants in four
// namespaces, each a real MinIO with MINIO_UPDATE=off, change image at
// once. Three are called (a release no update has succeeded with reaches
// the budget's namespaces first), MinIO refuses, they roll; the fourth is
// never called and says UpdatesHalted naming the three, as do a Warning
// Event and the metric. Its annotation resumes the release for it alone.
func TestAReleaseFailingInPlaceHaltsAfterTheBudget(t *testing.T) {
	t.Parallel()
	e := newUpdateEnv(t, updateOpts{tenantNamespaces: 3, releases: []string{""}, minioEnv: []string{"MINIO_UPDATE=off"}})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)
	tenants := []*fleetTenant{{ns: e.tenantNS, store: e.store, minio: e.minio}}
	for range 3 {
		tenants = append(tenants, e.addTenant(t, "MINIO_UPDATE=off"))
	}
	for _, ft := range tenants {
		require.Eventually(t, func() bool { return ft.version(t).Reason == "Current" }, 60*time.Second, 100*time.Millisecond)
	}
	for _, ft := range tenants {
		ft.setImage(t, e.newImage)
	}
	var rolled, halted []*fleetTenant
	require.Eventually(t, func() bool {
		rolled, halted = nil, nil
		for _, ft := range tenants {
			switch ft.version(t).Reason {
			case "RollingUpdate", "WaitingForNodes":
				rolled = append(rolled, ft)
			case "UpdatesHalted":
				halted = append(halted, ft)
			}
		}
		return len(rolled) == 3 && len(halted) == 1
	}, 2*time.Minute, 100*time.Millisecond, "three refused and rolled, the fourth halted")
	h := halted[0]
	c := h.version(t)
	assert.Contains(t, c.Message, "updates to "+e.newer+" are halted")
	// Counted by cause; another tenant's ObjectStore and MinIO's words are
	// the halt record's and the operator log's, not this tenant's.
	assert.Contains(t, c.Message, "failed in 3 namespaces (InPlaceRefused)")
	for _, ft := range rolled {
		assert.NotContains(t, c.Message, ft.ns+"/"+ft.store, "no other tenant named")
		assert.Eventually(t, func() bool { return slices.Contains(ft.eventReasons(t), "Normal UpdatingInPlace") }, 30*time.Second, 100*time.Millisecond,
			"%s/%s was called", ft.ns, ft.store)
	}
	assert.NotContains(t, c.Message, "MethodNotAllowed", "no other tenant's MinIO quoted")
	// Events are written after the status, by the recorder's own
	// goroutine: each is waited for (a loaded CI run listed them between
	// the two).
	assert.Eventually(t, func() bool { return slices.Contains(h.eventReasons(t), "Warning UpdatesHalted") }, 30*time.Second, 100*time.Millisecond,
		"the halted tenant is told: %v", h.eventReasons(t))
	assert.NotContains(t, h.eventReasons(t), "Normal UpdatingInPlace", "never called")
	warned := func() int {
		n := 0
		for _, ft := range rolled {
			for _, r := range ft.eventReasons(t) {
				if r == "Warning UpdatesHalted" {
					n++
				}
			}
		}
		return n
	}
	assert.Eventually(t, func() bool { return warned() >= 1 }, 30*time.Second, 100*time.Millisecond, "the failure that spent the budget says so")
	assert.Equal(t, 1, warned(), "only the failure that spent the budget says so")
	assert.Contains(t, kubectl(t, "get", "ostore", "-n", h.ns), "Halted")
	metrics := string(get(t, http.DefaultClient, "http://"+e.op.metricsAddr+"/metrics"))
	assert.Contains(t, metrics, fmt.Sprintf(`objectstore_operator_updates_halted{release=%q} 1`, e.newer))
	_, err := adminClient(t).CoordinationV1().Leases(e.opNS).Get(t.Context(), "object-store-operator-update-halts", metav1.GetOptions{})
	require.NoError(t, err, "the halt record")

	kubectl(t, "annotate", "objectstore", h.store, "-n", h.ns, apiv1.ResumeUpdatesAnnotation+"="+e.newer)
	require.Eventually(t, func() bool { return h.version(t).Reason == "RollingUpdate" }, 2*time.Minute, 100*time.Millisecond,
		"resumed, called, refused and rolled")
	assert.Contains(t, h.eventReasons(t), "Normal UpdatingInPlace")
}

// TestTheFleetCapHoldsAcrossAnOperatorRestart: three tenants in three
// namespaces whose admin API never answers an update call, with
// OPERATOR_MAX_CONCURRENT_UPDATES=2. Two are called; the third waits,
// naming them. A new operator process counts the two updates recorded in
// their status and calls no one.
func TestTheFleetCapHoldsAcrossAnOperatorRestart(t *testing.T) {
	t.Parallel()
	e := newUpdateEnv(t, updateOpts{tenantNamespaces: 4, deferMinIO: true, noMinIO: true, operatorEnv: []string{"OPERATOR_MAX_CONCURRENT_UPDATES=2"}})
	srv, calls := hangingAdmin(t, e.older, 1)
	hang := func() string {
		ns := e.takeNamespace(t)
		dockerConfigSecret(t, ns, "regcred", e.reg.host, e.reg.user, e.reg.pass)
		// Each tenant signs its calls with its namespace as access key.
		putNamedSecret(t, ns, "tenant-env", map[string][]byte{apiv1.ConfigEnvKey: []byte("export MINIO_ROOT_USER=" + ns + "\nexport MINIO_ROOT_PASSWORD=b12345678\n")})
		applyYAML(t, fmt.Sprintf(`apiVersion: aistor.min.io/v1
kind: ObjectStore
metadata:
  name: hang
  namespace: %s
spec:
  image: %s
  imagePullSecrets:
    - name: regcred
  configuration:
    name: tenant-env
  updates:
    endpoint: %s
`, ns, e.newImage, srv.URL))
		tenantStatefulSet(t, ns, "hang", 1, e.oldImage)
		// A new StatefulSet's pods are replaced once for the certificates
		// and the update waits for that (WaitingForPods); the counts below
		// are of tenants past it.
		waitFirstRestart(t, ns, poolName("hang"))
		return ns
	}
	var namespaces []string
	for range 3 {
		namespaces = append(namespaces, hang())
	}
	queuedIn := func(nss ...string) []string {
		var out []string
		for _, ns := range nss {
			if c := conditionOf(t, ns, "hang", apiv1.ConditionVersionCurrent); c.Reason == "UpdateQueued" &&
				strings.Contains(c.Message, "2 in-place updates are in flight across the fleet") {
				out = append(out, ns)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return calls.Load() == 2 && len(queuedIn(namespaces...)) == 1 }, 60*time.Second, 50*time.Millisecond,
		"two calls hang, the third waits for the fleet")
	waiting := queuedIn(namespaces...)[0]
	inFlight := calls.callers()
	require.Len(t, inFlight, 2)
	require.NotContains(t, inFlight, waiting)
	out := kubectl(t, "get", "ostore", "-n", waiting)
	assert.Regexp(t, regexp.MustCompile(`UPDATE`), out)
	assert.Contains(t, out, "Queued", "the Update column")

	e.op.stop()
	e.op = startOperator(t, e.env)
	// A tenant added after the new process started: when it says it
	// waits, the new process has counted the fleet from the status alone.
	namespaces = append(namespaces, hang())
	// The new process first waits for its own store to resolve the
	// release (WaitingForBinary), then counts the fleet for each.
	require.Eventually(t, func() bool { return len(queuedIn(waiting, namespaces[3])) == 2 }, 60*time.Second, 50*time.Millisecond,
		"both wait for the fleet")
	// The new process may ask the two in flight for their dry run again
	// (its answer was lost with the old process; a dry run restarts
	// nothing), but calls no one else.
	assert.Equal(t, inFlight, calls.callers(), "no call for another tenant from the new process")
	assert.Len(t, queuedIn(namespaces...), 2)
}

// TestAWindowTwoMinutesAheadIsWhereTheUpdateHappens: the image changes
// with a window opening in the next two minutes (cron's minute). Until
// then the condition says OutsideWindow and when it opens, the Update
// column says Window HH:MMZ and the node stays on the older release; once
// it opens the update is made in place.
func TestAWindowTwoMinutesAheadIsWhereTheUpdateHappens(t *testing.T) {
	t.Parallel()
	e := newUpdateEnv(t, updateOpts{releases: []string{""}})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)
	opens := time.Now().UTC().Add(2 * time.Minute).Truncate(time.Minute)
	patch := fmt.Sprintf(`{"spec":{"image":%q,"updates":{"window":{"schedule":"%d %d * * *","duration":"10m"}}}}`,
		e.newImage, opens.Minute(), opens.Hour())
	_, err := dyn(t).Resource(apiv1.Resource).Namespace(e.tenantNS).Patch(t.Context(), e.store, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	c := e.waitVersion(t, metav1.ConditionFalse, "OutsideWindow", 60*time.Second)
	assert.Contains(t, c.Message, "opens next at "+opens.Format(time.RFC3339))
	assert.Contains(t, kubectl(t, "get", "ostore", e.store, "-n", e.tenantNS), "Window "+opens.Format("15:04Z"))
	for time.Now().Before(opens.Add(-time.Second)) {
		require.True(t, e.minio.allRun(t, e.older), "not updated before the window opens")
		require.Equal(t, "OutsideWindow", conditionOf(t, e.tenantNS, e.store, apiv1.ConditionVersionCurrent).Reason)
		time.Sleep(500 * time.Millisecond)
	}
	e.waitVersion(t, metav1.ConditionTrue, "UpdatedInPlace", 3*time.Minute)
	assert.True(t, e.minio.allRun(t, e.newer))
	assert.Contains(t, kubectl(t, "get", "ostore", e.store, "-n", e.tenantNS), "Current")
}

// TestAnInvalidWindowIsRefusedNamingTheField: a schedule that never
// fires (February 30th) starts nothing and says which field is wrong.
func TestAnInvalidWindowIsRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	e := newUpdateEnv(t, updateOpts{releases: []string{""}})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)
	patch := fmt.Sprintf(`{"spec":{"image":%q,"updates":{"window":{"schedule":"0 0 30 2 *","duration":"1h"}}}}`, e.newImage)
	_, err := dyn(t).Resource(apiv1.Resource).Namespace(e.tenantNS).Patch(t.Context(), e.store, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	c := e.waitVersion(t, metav1.ConditionFalse, "InvalidWindow", 60*time.Second)
	assert.Contains(t, c.Message, "spec.updates.window")
	assert.Contains(t, c.Message, "never fires")
	assert.True(t, e.minio.allRun(t, e.older))
}

// TestTheShortNameCollidesWithNothing: ostore names ObjectStores alone
// among every resource the apiserver serves.
func TestTheShortNameCollidesWithNothing(t *testing.T) {
	ensureCRD(t)
	out := kubectl(t, "api-resources", "--no-headers")
	n := 0
	for _, line := range strings.Split(out, "\n") {
		for _, f := range strings.Fields(line) {
			for _, short := range strings.Split(f, ",") {
				if short == "ostore" {
					n++
				}
			}
		}
	}
	assert.Equal(t, 1, n, "%s", out)
}
