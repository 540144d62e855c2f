package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/binstore/binstoretest"
	"github.com/object-store-operator/operator/upgradeserver"
)

// binaryStatus reads an ObjectStore's status.binary.
func binaryStatus(t testing.TB, ns, name string) *apiv1.BinaryStatus {
	t.Helper()
	u, err := dyn(t).Resource(apiv1.Resource).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	os, err := apiv1.FromUnstructured(u)
	require.NoError(t, err)
	return os.Status.Binary
}

// waitBinaryStatus waits for status.binary to name want's bytes.
func waitBinaryStatus(t testing.TB, ns, name string, want []byte) *apiv1.BinaryStatus {
	t.Helper()
	var b *apiv1.BinaryStatus
	require.Eventually(t, func() bool {
		b = binaryStatus(t, ns, name)
		return b != nil && b.SHA256 == binstoretest.SHA256(want)
	}, 30*time.Second, 50*time.Millisecond, "status.binary of %s/%s names its own bytes; have %+v", ns, name, b)
	return b
}

// status returns the HTTP status of a GET and its body.
func status(t testing.TB, c *http.Client, url string) (int, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	require.NoError(t, err)
	return resp.StatusCode, body
}

// TestRelabelledBinaryCannotTakeAnotherTenantsRelease: tenant A labels
// other validly signed bytes with tenant B's release and applies them
// first. B is still served its own bytes at its own digest URL, on every
// replica, whichever order the replica saw the two in; the plain path of
// the release, claimed with different bytes, serves neither.
func TestRelabelledBinaryCannotTakeAnotherTenantsRelease(t *testing.T) {
	ensureCRD(t)
	reg := startRegistry(t)
	opNS, tenantA, tenantB := operatorNamespace(t), operatorNamespace(t), operatorNamespace(t)
	trustCA(t, opNS, "aistor-ca-tls-registry", reg.caPEM)
	dockerConfigSecret(t, tenantA, "regcred", reg.host, reg.user, reg.pass)
	dockerConfigSecret(t, tenantB, "regcred", reg.host, reg.user, reg.pass)
	env := func() []string {
		return k8sEnv(opNS, "OPERATOR_UPDATE_DIR="+filepath.Join(t.TempDir(), "store"),
			"OPERATOR_LEASE_DURATION=3s", "OPERATOR_LEASE_RENEW_DEADLINE=2s", "OPERATOR_LEASE_RETRY_PERIOD=200ms")
	}
	// Two replicas see A's claim first; a third starts once both exist.
	ops := []*operator{startOperator(t, env()), startOperator(t, env())}
	base := "https://" + serviceName + "." + opNS + ".svc.cluster.local"

	relabelled, genuine := randomBytes(t, 1<<20), randomBytes(t, 1<<20)
	a := &binEnv{tenantNS: tenantA, reg: reg, opNS: opNS}
	a.objectStore(t, "a", reg.pushImage(t, "tenant-a/minio:latest", imageSpec{binary: relabelled, releaseLbl: release}), "regcred")
	a.waitBinaryCondition(t, "a", metav1.ConditionTrue, "Available")
	for i, op := range ops {
		require.Eventually(t, func() bool {
			code, _ := status(t, op.client(t, testCluster.KubeletServingCA, 1), base+upgradeserver.UpdatePath+"/linux-amd64/minio."+release)
			return code == http.StatusOK
		}, 30*time.Second, 20*time.Millisecond, "replica %d holds A's claim before B applies", i)
	}

	b := &binEnv{tenantNS: tenantB, reg: reg, opNS: opNS}
	start := time.Now()
	b.objectStore(t, "b", reg.pushImage(t, "minio/aistor:"+release, imageSpec{binary: genuine, releaseLbl: release}), "regcred")
	require.Eventually(t, func() bool {
		c := conditionOf(t, tenantB, "b", apiv1.ConditionBinaryAvailable)
		return c.Status == metav1.ConditionTrue
	}, 30*time.Second, 50*time.Millisecond, "B is BinaryAvailable=True within 30 s, A's claim notwithstanding")
	t.Logf("B available %s after it was applied", time.Since(start).Round(time.Millisecond))
	ops = append(ops, startOperator(t, env()))

	statA, statB := waitBinaryStatus(t, tenantA, "a", relabelled), waitBinaryStatus(t, tenantB, "b", genuine)
	for _, st := range []*apiv1.BinaryStatus{statA, statB} {
		assert.Equal(t, release, st.Release)
		assert.Equal(t, "linux-amd64", st.Platform)
		assert.True(t, strings.HasPrefix(st.URL, base+":"), st.URL)
		assert.True(t, strings.HasSuffix(st.URL, upgradeserver.UpdatePath+"/sha256/"+st.SHA256+"/minio."+release+".sha256sum"), st.URL)
	}
	for i, op := range ops {
		c := op.client(t, testCluster.KubeletServingCA, 2)
		require.Eventually(t, func() bool {
			codeA, _ := status(t, c, statA.URL)
			codeB, _ := status(t, c, statB.URL)
			return codeA == http.StatusOK && codeB == http.StatusOK
		}, 30*time.Second, 20*time.Millisecond, "replica %d serves both digest URLs", i)
		assert.Equal(t, genuine, updateClientWalk(t, c, statB.URL), "replica %d serves B its own bytes", i)
		assert.Equal(t, relabelled, updateClientWalk(t, c, statA.URL), "replica %d serves A its own bytes", i)
		for _, plain := range []string{"/linux-amd64/minio." + release, "/linux-amd64/minio." + release + ".sha256sum"} {
			code, body := status(t, c, base+upgradeserver.UpdatePath+plain)
			assert.Equal(t, http.StatusNotFound, code, "replica %d: the plain path serves neither", i)
			assert.NotEqual(t, genuine, body)
			assert.NotEqual(t, relabelled, body)
		}
		l := listing(t, c, base)
		assert.Empty(t, l.Binaries, "replica %d lists neither under the release name", i)
		require.Len(t, l.Withheld, 1, "replica %d says why", i)
		assert.Equal(t, release, l.Withheld[0].Release)
		assert.Contains(t, l.Withheld[0].Reason, "different binaries")
		// A's digest under another release name, and a digest nobody has.
		for _, wrong := range []string{
			base + upgradeserver.UpdatePath + "/sha256/" + statA.SHA256 + "/minio.RELEASE.2020-01-01T00-00-00Z.sha256sum",
			base + upgradeserver.UpdatePath + "/sha256/" + binstoretest.SHA256([]byte("none")) + "/minio." + release + ".sha256sum",
		} {
			code, _ := status(t, c, wrong)
			assert.Equal(t, http.StatusNotFound, code, "replica %d: %s", i, wrong)
		}
	}
	assert.Equal(t, metav1.ConditionTrue, conditionOf(t, tenantA, "a", apiv1.ConditionBinaryAvailable).Status, "neither blocks the other")
	out := kubectl(t, "get", "objectstore", "b", "-n", tenantB, "-o", "wide")
	assert.Contains(t, out, statB.URL, "kubectl get -o wide shows the URL")
}

// TestOneBinaryUnderFiveLabelsIsStoredOnce: five tenants' images hold the
// same signed binary under five release labels; the store grows by about
// one copy, and each tenant's URL serves it under its own release name.
func TestOneBinaryUnderFiveLabelsIsStoredOnce(t *testing.T) {
	t.Parallel()
	e := newSoloBinEnv(t)
	content := randomBytes(t, 8<<20)
	before := du(t, e.updateDir)
	for i := range 5 {
		rel := fmt.Sprintf("RELEASE.2025-0%d-01T00-00-00Z", i+1)
		e.objectStore(t, fmt.Sprintf("t%d", i), e.reg.pushImage(t, fmt.Sprintf("tenant-%d/minio:%s", i, rel), imageSpec{binary: content, releaseLbl: rel}), "regcred")
	}
	c := e.op.client(t, testCluster.KubeletServingCA, 2)
	for i := range 5 {
		name := fmt.Sprintf("t%d", i)
		e.waitBinaryCondition(t, name, metav1.ConditionTrue, "Available")
		st := waitBinaryStatus(t, e.tenantNS, name, content)
		assert.Equal(t, fmt.Sprintf("RELEASE.2025-0%d-01T00-00-00Z", i+1), st.Release)
		assert.Equal(t, content, updateClientWalk(t, c, st.URL))
	}
	grown := du(t, e.updateDir) - before
	t.Logf("five release labels of one %d-byte binary: du of the store grew by %d bytes", len(content), grown)
	assert.Less(t, grown, int64(len(content))*5/4, "about one copy")
	assert.Len(t, e.listing(t).Binaries, 5, "each release is listed at its plain path")
}

// du is `du -sb`'s figure for dir (hard links counted once).
func du(t testing.TB, dir string) int64 {
	t.Helper()
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return 0
	}
	out, err := exec.Command("du", "-sB1", dir).Output()
	require.NoError(t, err)
	n, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	require.NoError(t, err)
	return n
}
