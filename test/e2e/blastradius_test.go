package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/test/cluster"
)

// TestHotfixLabelOfTheRunningReleaseKeepsTheOperatorUp: a tenant labels
// an image RELEASE.<T>.hotfix.<id> while its nodes run <T>. MinIO orders
// the two as one release; the operator once indexed an empty list of
// nodes "behind" and exited, and so did every leader after it. Now the
// same process keeps serving and the tenant gets a condition.
func TestHotfixLabelOfTheRunningReleaseKeepsTheOperatorUp(t *testing.T) {
	t.Parallel()
	// No warm-up: MinIO is never asked to update here.
	e := newUpdateEnv(t, updateOpts{})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)
	pid := e.op.cmd.Process.Pid
	hotfix := e.older + ".hotfix.deadbeef"
	image := e.reg.pushImage(t, "minio/aistor:"+hotfix, imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: hotfix})

	e.setImage(t, image)
	var c metav1.Condition
	require.Eventually(t, func() bool {
		c = conditionOf(t, e.tenantNS, e.store, apiv1.ConditionVersionCurrent)
		return c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "which MinIO orders with "+hotfix)
	}, 60*time.Second, 100*time.Millisecond, "the condition says why nothing is updated in place")
	assert.Equal(t, "Current", c.Reason)
	assert.Equal(t, image, e.statefulSetImage(t), "pods take the hotfix build as they restart")
	select {
	case <-e.op.done:
		t.Fatal("the operator exited")
	default:
	}
	assert.Equal(t, pid, e.op.cmd.Process.Pid)
	l := listing(t, e.op.client(t, e.servingCert, 1), "https://"+e.op.upgradeAddr)
	assert.NotEmpty(t, l.Binaries, "the upgrade server still serves")
	assert.Zero(t, updateCalls(e.op, hotfix), "MinIO is not asked for a release it calls its own")
}

// TestHotfixReleaseIsUpdatedInPlace: a real hotfix-stamped MinIO build
// (make tools: RELEASE.<T>.hotfix.<id>, reporting version <T>) is newer
// than the nodes' release; MinIO takes it in place, and the operator
// knows the nodes run it although they report only its time.
func TestHotfixReleaseIsUpdatedInPlace(t *testing.T) {
	t.Parallel()
	hotfix, err := cluster.MinIOHotfixRelease()
	require.NoError(t, err)
	e := newUpdateEnv(t, updateOpts{newRelease: hotfix})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)
	e.minio.warm(t)
	e.setImage(t, e.newImage)
	c := e.waitVersion(t, metav1.ConditionTrue, "UpdatedInPlace", 3*time.Minute)
	assert.Contains(t, c.Message, hotfix)
	plain, _, _ := strings.Cut(hotfix, ".hotfix.")
	assert.True(t, e.minio.allRun(t, plain), "every node reports the hotfix's time: %v", e.minio.versions(t))
	assert.Equal(t, 1, realCalls(e.op, hotfix), "one call")
	assert.Equal(t, 2, updateCalls(e.op, hotfix), "after one dry run: two .sha256sum fetches")
	assert.Equal(t, e.newImage, e.statefulSetImage(t))
}

// hangingAdmin is a MinIO admin API that reports nodes on release and
// never answers an update call: what a hostile tenant aims its endpoint
// at to hold the operator's update workers.
func hangingAdmin(t *testing.T, release string, nodes int) (*httptest.Server, *adminCalls) {
	t.Helper()
	rt, err := time.Parse("2006-01-02T15-04-05Z", strings.TrimPrefix(release, "RELEASE."))
	require.NoError(t, err)
	calls := &adminCalls{by: map[string]int{}}
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/info"):
			var info madmin.InfoMessage
			for i := range nodes {
				info.Servers = append(info.Servers, madmin.ServerProperties{Endpoint: fmt.Sprintf("127.0.0.1:%d", 9000+i),
					State: string(madmin.ItemOnline), Version: rt.Format(time.RFC3339)})
			}
			_ = json.NewEncoder(w).Encode(info)
		case r.URL.Path == "/minio/health/cluster":
			// Healthy, and a node may go down: the operator's rollouts
			// (the first restart of a new StatefulSet) go on.
		case strings.HasSuffix(r.URL.Path, "/update"):
			calls.add(r)
			// The request's context ends with the operator's call only once
			// its body is read; the test's end ends it too.
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	return srv, calls
}

// adminCalls counts the update calls a fake admin API got, in all and by
// the access key that signed them.
type adminCalls struct {
	total atomic.Int32
	mu    sync.Mutex
	by    map[string]int
}

func (c *adminCalls) add(r *http.Request) {
	c.total.Add(1)
	// AWS4-HMAC-SHA256 Credential=<access key>/<date>/...
	_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	key, _, _ := strings.Cut(cred, "/")
	c.mu.Lock()
	c.by[key]++
	c.mu.Unlock()
}

// Load is how many calls were made in all.
func (c *adminCalls) Load() int32 { return c.total.Load() }

// callers are the access keys that called, sorted.
func (c *adminCalls) callers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.by))
}

// TestHangingUpdateEndpointsDoNotDelayAHealthyTenant: four ObjectStores
// in one namespace whose admin endpoint never answers an update call
// (there were four update workers). Their namespace holds one call at a
// time and the other three wait without a worker; a healthy tenant in
// another namespace is updated in place as usual.
func TestHangingUpdateEndpointsDoNotDelayAHealthyTenant(t *testing.T) {
	t.Parallel()
	hostile := operatorNamespace(t)
	e := newUpdateEnv(t, updateOpts{watch: []string{hostile}})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)
	e.minio.warm(t)

	dockerConfigSecret(t, hostile, "regcred", e.reg.host, e.reg.user, e.reg.pass)
	putNamedSecret(t, hostile, "tenant-env", map[string][]byte{apiv1.ConfigEnvKey: []byte("export MINIO_ROOT_USER=a\nexport MINIO_ROOT_PASSWORD=b12345678\n")})
	srv, calls := hangingAdmin(t, e.older, 4)
	for i := range 4 {
		name := fmt.Sprintf("hang-%d", i)
		applyYAML(t, fmt.Sprintf(`apiVersion: aistor.min.io/v1
kind: ObjectStore
metadata:
  name: %s
  namespace: %s
spec:
  image: %s
  imagePullSecrets:
    - name: regcred
  configuration:
    name: tenant-env
  updates:
    endpoint: %s
`, name, hostile, e.newImage, srv.URL))
		tenantStatefulSet(t, hostile, name, 1, e.oldImage)
	}
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 60*time.Second, 50*time.Millisecond, "one hostile call hangs")
	require.Eventually(t, func() bool {
		queued := 0
		for i := range 4 {
			if conditionOf(t, hostile, fmt.Sprintf("hang-%d", i), apiv1.ConditionVersionCurrent).Reason == "UpdateQueued" {
				queued++
			}
		}
		return queued == 3
	}, 60*time.Second, 100*time.Millisecond, "the other three wait for their namespace's slot")
	// Read from the operator's cache, a moment behind the API.
	var metrics string
	assert.Eventually(t, func() bool {
		metrics = string(get(t, http.DefaultClient, "http://"+e.op.metricsAddr+"/metrics"))
		// Whichever of the four got the slot, the other three wait.
		queued := regexp.MustCompile(fmt.Sprintf(`objectstore_operator_objectstore_condition\{name="hang-\d",namespace="%s",reason="UpdateQueued",status="False",type="VersionCurrent"\} 1`, hostile))
		return len(queued.FindAllString(metrics, -1)) == 3
	}, 30*time.Second, 100*time.Millisecond, "what an SRE sees of the fleet")
	assert.Contains(t, metrics, "objectstore_operator_leader 1")
	assert.Regexp(t, `objectstore_operator_build_info\{version="[^"]+"\} 1`, metrics)

	start := time.Now()
	e.setImage(t, e.newImage)
	e.waitVersion(t, metav1.ConditionTrue, "UpdatedInPlace", 3*time.Minute)
	t.Logf("healthy tenant updated in place in %s beside four hanging ones", time.Since(start).Round(time.Millisecond))
	assert.True(t, e.minio.allRun(t, e.newer))
	assert.Equal(t, int32(1), calls.Load(), "the hostile namespace never held more than its one call")
}

// TestObjectStoreAppliedBeforeItsMinIOShowsItsRelease: the usual order,
// the ObjectStore first and its pods later. An admin API that does not
// answer yet is polled with backoff, never given a terminal reason, and
// the release shows soon after MinIO answers.
func TestObjectStoreAppliedBeforeItsMinIOShowsItsRelease(t *testing.T) {
	t.Parallel()
	applied := time.Now()
	e := newUpdateEnv(t, updateOpts{deferMinIO: true})
	c := e.waitVersion(t, metav1.ConditionUnknown, "TenantUnreachable", 60*time.Second)
	assert.Contains(t, c.Message, "127.0.0.1")
	// The pods come up 20 s after the ObjectStore.
	for time.Since(applied) < 20*time.Second {
		c = conditionOf(t, e.tenantNS, e.store, apiv1.ConditionVersionCurrent)
		require.Equal(t, "TenantUnreachable", c.Reason, "never a verdict while the endpoint does not answer: %s", c.Message)
		time.Sleep(200 * time.Millisecond)
	}
	e.startMinIO(t) // no warm-up: MinIO is never asked to update here
	answered := time.Now()
	require.Eventually(t, func() bool { return statusRelease(t, e.tenantNS, e.store) == e.older }, 30*time.Second, 100*time.Millisecond)
	took := time.Since(answered)
	t.Logf("status.release %s after MinIO answered", took.Round(time.Millisecond))
	assert.Less(t, took, 10*time.Second)
	// Right after a start MinIO may not list every node yet
	// (WaitingForNodes); the condition follows as they report.
	assert.Eventually(t, func() bool {
		return conditionOf(t, e.tenantNS, e.store, apiv1.ConditionVersionCurrent).Reason == "Current"
	}, 30*time.Second, 100*time.Millisecond, "VersionCurrent=Current once every node reports")
}
