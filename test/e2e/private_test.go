package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"aead.dev/minisign"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/binstore/binstoretest"
	"github.com/object-store-operator/operator/upgradeserver"
)

// TestPrivateBinaryIsServedOnlyAtItsTenantsURL: a binary pulled from a
// repository that refuses anonymous reads, with the tenant's pull Secret,
// is not in the anonymous listing and answers 404 at the plain paths and
// at its digest path; the tenant's own status.binary.url serves it, as
// MinIO's update client walks it. Another ObjectStore of the same image
// gets another URL, and neither component opens the other's.
func TestPrivateBinaryIsServedOnlyAtItsTenantsURL(t *testing.T) {
	t.Parallel()
	e := newSoloBinEnv(t)
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

// TestPlatformKeySignsForEachTenant: two tenants' hardened images hold the
// same unsigned binary. Each tenant's status.binary.url serves a signature
// the platform key made for it, whose trusted comment names its
// ObjectStore; neither is served at the other's URL. A third tenant whose
// image ships its own signature for the same bytes is served that one.
func TestPlatformKeySignsForEachTenant(t *testing.T) {
	platform := binstoretest.NewKey(t)
	opNS := operatorNamespace(t)
	_, err := adminClient(t).CoreV1().Secrets(opNS).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "platform-minisign"},
		Data:       map[string][]byte{"minisign.key": platform.PrivateText(t)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	a := newBinEnvIn(t, opNS, "OPERATOR_SIGNING_KEY_SECRET=platform-minisign")
	b := &binEnv{tenantNS: operatorNamespace(t), reg: a.reg, opNS: opNS, op: a.op}
	signed := &binEnv{tenantNS: operatorNamespace(t), reg: a.reg, opNS: opNS, op: a.op}
	bin := randomBytes(t, 1<<20)
	a.objectStore(t, "a", a.reg.pushImage(t, "team-a/hardened:"+release, imageSpec{binary: bin, noSidecars: true, releaseLbl: release}))
	b.objectStore(t, "b", a.reg.pushImage(t, "team-b/hardened:"+release, imageSpec{binary: bin, noSidecars: true, releaseLbl: release}))
	a.waitBinaryCondition(t, "a", metav1.ConditionTrue, "Available")
	b.waitBinaryCondition(t, "b", metav1.ConditionTrue, "Available")
	stA, stB := waitBinaryStatus(t, a.tenantNS, "a", bin), waitBinaryStatus(t, b.tenantNS, "b", bin)
	require.NotEqual(t, stA.URL, stB.URL)

	c := a.op.client(t, testCluster.KubeletServingCA, 2)
	sigs := map[string][]byte{}
	for who, url := range map[string]string{a.tenantNS + "/a": stA.URL, b.tenantNS + "/b": stB.URL} {
		assert.Equal(t, bin, updateClientWalk(t, c, url, platform), "%s: MinIO trusting the platform key installs it", who)
		sig := get(t, c, strings.TrimSuffix(url, ".sha256sum")+".minisig")
		var parsed minisign.Signature
		require.NoError(t, parsed.UnmarshalText(sig))
		assert.Contains(t, parsed.TrustedComment, "objectstore:"+who, "the trusted comment names the ObjectStore")
		sigs[who] = sig
	}
	assert.NotEqual(t, sigs[a.tenantNS+"/a"], sigs[b.tenantNS+"/b"], "A's signature is not served at B's URL")

	// The same bytes from an image with its own signature: its tenant is
	// served the image's .minisig, not one the platform key made.
	signed.objectStore(t, "signed", a.reg.pushImage(t, "vendor/minio:"+release, imageSpec{binary: bin, releaseLbl: release}))
	signed.waitBinaryCondition(t, "signed", metav1.ConditionTrue, "Available")
	stS := waitBinaryStatus(t, signed.tenantNS, "signed", bin)
	require.Eventually(t, func() bool {
		code, sig := status(t, c, strings.TrimSuffix(stS.URL, ".sha256sum")+".minisig")
		return code == http.StatusOK && testKey.Verify(bin, sig)
	}, 30*time.Second, 50*time.Millisecond, "the image's own signature at %s", stS.URL)
	assert.Equal(t, bin, updateClientWalk(t, c, stS.URL))
}

// TestRealMinIOUpdatesInPlaceFromAPrivateURL: the newer release comes from
// a repository that refuses anonymous reads; the real MinIO nodes update in
// place from the tenant's own private URL, and nothing else serves it.
func TestRealMinIOUpdatesInPlaceFromAPrivateURL(t *testing.T) {
	t.Parallel()
	e := newUpdateEnv(t, updateOpts{newRepo: privateRepos + "licensed/aistor"})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)
	e.minio.warm(t)
	e.setImage(t, e.newImage)
	c := e.waitVersion(t, metav1.ConditionTrue, "UpdatedInPlace", 3*time.Minute)
	assert.Contains(t, c.Message, e.newer)
	assert.True(t, e.minio.allRun(t, e.newer), "every node reports %s: %v", e.newer, e.minio.versions(t))
	own := binaryStatus(t, e.tenantNS, e.store)
	require.NotNil(t, own)
	m := regexp.MustCompile(`/sha256/` + own.SHA256 + `/([0-9a-f]{64})/minio\.` + regexp.QuoteMeta(e.newer) + `\.sha256sum$`).FindStringSubmatch(own.URL)
	require.NotNil(t, m, "the private URL: %s", own.URL)
	assert.Equal(t, 2, servedOK(e.op, "sha256/"+own.SHA256+"/"+m[1]+"/minio."+e.newer+".sha256sum"), "MinIO dry-ran and updated from the tenant's private URL")
	assert.Zero(t, servedOK(e.op, "sha256/"+own.SHA256+"/minio."+e.newer+".sha256sum"), "not from the digest path")
}
