package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/upgradeserver"
)

// TestPrivateBinaryIsServedOnlyAtItsTenantsURL: a binary pulled from a
// repository that refuses anonymous reads, with the tenant's pull Secret,
// is not in the anonymous listing and answers 404 at the plain paths and
// at its digest path; the tenant's own status.binary.url serves it, as
// MinIO's update client walks it. Another ObjectStore of the same image
// gets another URL, and neither component opens the other's.
func TestPrivateBinaryIsServedOnlyAtItsTenantsURL(t *testing.T) {
	e := newBinEnv(t)
	licensed := randomBytes(t, 1<<20)
	image := e.reg.pushImage(t, privateRepos+"licensed/minio:"+release, imageSpec{binary: licensed, releaseLbl: release})
	e.objectStore(t, "licensed", image, "regcred")
	e.objectStore(t, "sibling", image, "regcred")
	cond := e.waitBinaryCondition(t, "licensed", metav1.ConditionTrue, "Available")
	assert.Contains(t, cond.Message, "served only at its own URL")
	st := waitBinaryStatus(t, e.tenantNS, "licensed", licensed)
	sibling := waitBinaryStatus(t, e.tenantNS, "sibling", licensed)

	base := "https://" + serviceName + "." + e.opNS + ".svc.cluster.local"
	c := e.op.client(t, testCluster.KubeletServingCA, 2)
	root := base + upgradeserver.UpdatePath
	for _, path := range []string{
		"/minio." + release,
		"/minio." + release + ".sha256sum",
		"/linux-amd64/minio." + release,
		"/linux-amd64/minio." + release + ".sha256sum",
		"/sha256/" + st.SHA256 + "/minio." + release,
		"/sha256/" + st.SHA256 + "/minio." + release + ".sha256sum",
		"/sha256/" + st.SHA256 + "/minio." + release + ".minisig",
		"/sha256/" + st.SHA256 + "/" + strings.Repeat("0", 64) + "/minio." + release,
	} {
		code, body := status(t, c, root+path)
		assert.Equal(t, http.StatusNotFound, code, path)
		assert.NotEqual(t, licensed, body, path)
	}
	l := e.listing(t)
	assert.Empty(t, l.Binaries, "the anonymous listing does not show it")
	assert.Empty(t, l.Withheld)
	for _, b := range l.Binaries {
		assert.NotEqual(t, st.SHA256, b.SHA256)
	}
	own := regexp.MustCompile(`^` + regexp.QuoteMeta(base) + `:\d+` + upgradeserver.UpdatePath + `/sha256/` + st.SHA256 + `/([0-9a-f]{64})/minio\.` + regexp.QuoteMeta(release) + `\.sha256sum$`)
	m := own.FindStringSubmatch(st.URL)
	require.NotNil(t, m, "status.binary.url carries the tenant's component: %s", st.URL)
	require.NotEqual(t, st.URL, sibling.URL, "each ObjectStore has its own URL")
	assert.NotContains(t, st.URL, sibling.URL[strings.LastIndex(sibling.URL[:strings.LastIndex(sibling.URL, "/")], "/"):])

	assert.Equal(t, licensed, updateClientWalk(t, c, st.URL), "the tenant's own URL serves it")
	assert.Equal(t, licensed, updateClientWalk(t, c, sibling.URL))

	code, _ := status(t, c, base+upgradeserver.UpdatePath+"/sha256/"+st.SHA256+"/"+m[1][:63]+"0/minio."+release+".sha256sum")
	assert.Equal(t, http.StatusNotFound, code, "a component one character off")
}
