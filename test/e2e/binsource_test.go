package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"aead.dev/minisign"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/upgradeserver"
)

// binEnv is an operator trusting one test registry, and a tenant namespace
// with a pull Secret for it.
type binEnv struct {
	opNS, tenantNS string
	updateDir      string
	reg            *testRegistry
	op             *operator
	env            []string
}

func newBinEnv(t testing.TB, extraEnv ...string) *binEnv {
	t.Helper()
	return newBinEnvIn(t, operatorNamespace(t), extraEnv...)
}

// newSoloBinEnv is newBinEnv for a test that puts ObjectStores in the
// env's tenant namespace only: its operator reconciles that namespace
// alone, so the test may run in parallel with others.
func newSoloBinEnv(t testing.TB, extraEnv ...string) *binEnv {
	t.Helper()
	return newBinEnvScoped(t, operatorNamespace(t), true, extraEnv...)
}

// newBinEnvIn is newBinEnv with the operator in namespace opNS.
func newBinEnvIn(t testing.TB, opNS string, extraEnv ...string) *binEnv {
	t.Helper()
	return newBinEnvScoped(t, opNS, false, extraEnv...)
}

func newBinEnvScoped(t testing.TB, opNS string, scoped bool, extraEnv ...string) *binEnv {
	t.Helper()
	ensureCRD(t)
	e := &binEnv{reg: startRegistry(t), opNS: opNS, tenantNS: operatorNamespace(t)}
	trustCA(t, e.opNS, "aistor-ca-tls-registry", e.reg.caPEM)
	dockerConfigSecret(t, e.tenantNS, "regcred", e.reg.host, e.reg.user, e.reg.pass)
	if scoped {
		extraEnv = append([]string{"OPERATOR_WATCH_NAMESPACES=" + e.tenantNS}, extraEnv...)
	}
	e.env = k8sEnv(e.opNS, extraEnv...)
	e.updateDir = filepath.Join(os.TempDir(), "osop-e2e-updates-"+e.opNS)
	e.op = startOperator(t, e.env)
	return e
}

func (e *binEnv) objectStore(t testing.TB, name, image string, pullSecrets ...string) {
	t.Helper()
	var refs strings.Builder
	for _, s := range pullSecrets {
		fmt.Fprintf(&refs, "\n    - name: %s", s)
	}
	applyYAML(t, fmt.Sprintf(`apiVersion: aistor.min.io/v1
kind: ObjectStore
metadata:
  name: %s
  namespace: %s
spec:
  image: %s
  imagePullSecrets:%s
`, name, e.tenantNS, image, refs.String()))
}

func conditionOf(t testing.TB, ns, store, typ string) metav1.Condition {
	t.Helper()
	u, err := dyn(t).Resource(apiv1.Resource).Namespace(ns).Get(t.Context(), store, metav1.GetOptions{})
	require.NoError(t, err)
	os, err := apiv1.FromUnstructured(u)
	require.NoError(t, err)
	for _, c := range os.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func (e *binEnv) waitBinaryCondition(t testing.TB, store string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var c metav1.Condition
	// EventuallyWithT reports the condition last seen, not the one before
	// the first poll.
	require.EventuallyWithT(t, func(collect *assert.CollectT) {
		c = conditionOf(t, e.tenantNS, store, apiv1.ConditionBinaryAvailable)
		assert.Equal(collect, status, c.Status, "ObjectStore %s: BinaryAvailable (%s: %s)", store, c.Reason, c.Message)
		if reason != "" {
			assert.Equal(collect, reason, c.Reason, "ObjectStore %s: BinaryAvailable's reason (%s)", store, c.Message)
		}
	}, 60*time.Second, 50*time.Millisecond)
	return c
}

func (e *binEnv) listing(t testing.TB) upgradeserver.Listing {
	t.Helper()
	c := e.op.client(t, testCluster.KubeletServingCA, 4)
	return listing(t, c, "https://"+serviceName+"."+e.opNS+".svc.cluster.local")
}

// walk plays MinIO's update client against the listed binary.
func (e *binEnv) walk(t testing.TB, b upgradeserver.ListedBinary) []byte {
	t.Helper()
	return updateClientWalk(t, e.op.client(t, testCluster.KubeletServingCA, 4), b.SHA256SumURL)
}

func visibleFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasPrefix(info.Name(), ".") {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return out
}

func TestImageBinaryIsServedForEveryPlatformAndFetchedOnce(t *testing.T) {
	t.Parallel()
	e := newSoloBinEnv(t)
	amd, arm := randomBytes(t, 2<<20), randomBytes(t, 2<<20)
	image := e.reg.pushIndex(t, "minio/aistor:"+release, map[string]imageSpec{
		"linux/amd64": {binary: amd, releaseLbl: release, extraLayers: 2},
		"linux/arm64": {binary: arm, releaseLbl: release, binaryPath: "usr/bin/minio"},
	})
	for _, s := range []string{"store-a", "store-b"} {
		e.objectStore(t, s, image, "regcred")
	}
	for _, s := range []string{"store-a", "store-b"} {
		c := e.waitBinaryCondition(t, s, metav1.ConditionTrue, "Available")
		assert.Contains(t, c.Message, "minio."+release+" is served for linux/amd64, linux/arm64")
	}

	l := e.listing(t)
	require.Len(t, l.Binaries, 2)
	want := map[string][]byte{"amd64": amd, "arm64": arm}
	for _, b := range l.Binaries {
		assert.Equal(t, "minio."+release, b.Name)
		assert.Equal(t, binstore.FormatKeyID(testKey.Public.ID()), b.KeyID, "the listing names the key that verified it")
		assert.Contains(t, b.Source, image, "the listing names the image it came from")
		assert.Equal(t, want[b.Arch], e.walk(t, b), "the %s binary is the image's, and its signature verifies", b.Arch)
	}
	// Each ObjectStore resolves the image itself (manifests and the small
	// config blob); the layers are read once for both.
	layers := e.reg.layerDigests(t, image)
	require.NotEmpty(t, layers)
	for _, digest := range layers {
		n, ok := e.reg.blobGets.Load(digest)
		if ok {
			assert.LessOrEqual(t, n.(*atomic.Int64).Load(), int64(1), "layer %s fetched more than once for two ObjectStores", digest)
		}
	}
	out := kubectl(t, "get", "objectstore", "store-a", "-n", e.tenantNS, "-o", "wide")
	assert.Contains(t, out, "BINARY")
}

func TestImageProblemsAreReportedAndNothingIsListed(t *testing.T) {
	t.Parallel()
	e := newSoloBinEnv(t)
	other := startRegistry(t) // its CA is in no aistor-ca-tls Secret
	dockerConfigSecret(t, e.tenantNS, "badcred", e.reg.host, e.reg.user, "wrong")
	dockerConfigSecret(t, e.tenantNS, "othercred", other.host, other.user, other.pass)
	good := imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: release}
	stranger := binstoretest.NewKey(t)
	tests := []struct {
		store, image, secret, reason string
	}{
		{"signed-by-another-key", e.reg.pushImage(t, "minio/e:"+release, imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: release, signer: &stranger}), "regcred", "SignatureInvalid"},
		{"unsigned", e.reg.pushImage(t, "minio/f:"+release, imageSpec{binary: randomBytes(t, 1<<20), noSidecars: true, releaseLbl: release}), "regcred", "Unsigned"},
		{"wrong-pull-secret", e.reg.pushImage(t, "minio/a:"+release, good), "badcred", "AuthFailed"},
		{"no-binary", e.reg.pushImage(t, "minio/b:"+release, imageSpec{noBinary: true, releaseLbl: release}), "regcred", "NoMinIOBinary"},
		{"corrupted-checksum", e.reg.pushImage(t, "minio/c:"+release, imageSpec{binary: randomBytes(t, 1<<20), corruptSum: true, releaseLbl: release}), "regcred", "ChecksumMismatch"},
		{"untrusted-registry", other.pushImage(t, "minio/d:"+release, good), "othercred", "RegistryNotTrusted"},
		{"not-found", e.reg.host + "/minio/missing:" + release, "regcred", "ImageNotFound"},
		{"missing-pull-secret", e.reg.host + "/minio/a:" + release, "nosuchsecret", "PullSecretUnusable"},
	}
	for _, tt := range tests {
		e.objectStore(t, tt.store, tt.image, tt.secret)
	}
	for _, tt := range tests {
		t.Run(tt.store, func(t *testing.T) {
			c := e.waitBinaryCondition(t, tt.store, metav1.ConditionFalse, tt.reason)
			assert.NotEmpty(t, c.Message)
			assert.Contains(t, kubectl(t, "describe", "objectstore", tt.store, "-n", e.tenantNS), tt.reason, "an Event says it too")
			switch tt.reason {
			case "SignatureInvalid":
				assert.Contains(t, c.Message, binstore.FormatKeyID(stranger.Public.ID()), "the condition names the key id")
			case "Unsigned":
				assert.Contains(t, c.Message, "OPERATOR_SIGNING_KEY_SECRET", "the condition gives the remedy")
			case "NoMinIOBinary":
				assert.NotContains(t, c.Message, "NoMinIOBinary", "the reason is not repeated inside the message")
				assert.Contains(t, c.Message, "no opt/bin/minio or usr/bin/minio in any layer")
				assert.Contains(t, c.Message, "OPERATOR_RELEASE_MIRROR_URL", "the condition gives the remedy")
			}
		})
	}
	assert.Empty(t, e.listing(t).Binaries)
	assert.Empty(t, visibleFiles(t, e.updateDir), "nothing landed in the store")
}

func TestHardenedImageIsSignedWithThePlatformKey(t *testing.T) {
	platform := binstoretest.NewKey(t)
	opNS := operatorNamespace(t)
	_, err := adminClient(t).CoreV1().Secrets(opNS).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "platform-minisign"},
		Data:       map[string][]byte{"minisign.key": platform.PrivateText(t)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e := newBinEnvIn(t, opNS, "OPERATOR_SIGNING_KEY_SECRET=platform-minisign")
	bin := randomBytes(t, 1<<20)
	image := e.reg.pushImage(t, "minio/hardened:"+release, imageSpec{binary: bin, noSidecars: true, releaseLbl: release})
	e.objectStore(t, "hardened", image, "regcred")
	c := e.waitBinaryCondition(t, "hardened", metav1.ConditionTrue, "Available")
	assert.Contains(t, c.Message, binstore.FormatKeyID(platform.Public.ID()))
	l := e.listing(t)
	require.Len(t, l.Binaries, 1)
	assert.Equal(t, binstore.FormatKeyID(platform.Public.ID()), l.Binaries[0].KeyID)
	// A tenant with MINIO_UPDATE_MINISIGN_PUBKEY set to the platform key
	// verifies it, as MinIO's update client does.
	assert.Equal(t, bin, updateClientWalk(t, e.op.client(t, testCluster.KubeletServingCA, 4), l.Binaries[0].SHA256SumURL, platform))
	sig := get(t, e.op.client(t, testCluster.KubeletServingCA, 1), l.Binaries[0].MinisigURL)
	var parsed minisign.Signature
	require.NoError(t, parsed.UnmarshalText(sig))
	assert.Contains(t, parsed.TrustedComment, image, "the signed comment records the image")
	assert.Contains(t, parsed.TrustedComment, "layer:sha256:", "and the layer digest")
}

func TestReleaseMirrorFillsWhatNoImageProvides(t *testing.T) {
	mirrorDir := t.TempDir()
	const mirrorRelease = "RELEASE.2025-05-01T00-00-00Z"
	bins := map[string][]byte{}
	for _, p := range []string{"linux-amd64", "linux-arm64"} {
		bins[p] = randomBytes(t, 1<<20)
		require.NoError(t, os.MkdirAll(filepath.Join(mirrorDir, "releases", p), 0o755))
		name := "minio." + mirrorRelease
		sum := sha256.Sum256(bins[p])
		require.NoError(t, os.WriteFile(filepath.Join(mirrorDir, "releases", p, name), bins[p], 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(mirrorDir, "releases", p, name+".sha256sum"), []byte(hex.EncodeToString(sum[:])+"  "+name+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(mirrorDir, "releases", p, name+".minisig"), testKey.Sign(t, bins[p]), 0o644))
	}
	now := time.Now()
	certPEM, keyPEM, _ := testutil.KeyPair(t, nil, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))
	mirror := httptest.NewUnstartedServer(http.FileServer(http.Dir(mirrorDir)))
	cert, err := tlsKeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	mirror.TLS = cert
	mirror.StartTLS()
	t.Cleanup(mirror.Close)

	opNS := operatorNamespace(t)
	trustCA(t, opNS, "aistor-ca-tls-mirror", certPEM)
	e := &binEnv{reg: startRegistry(t), opNS: opNS, tenantNS: operatorNamespace(t)}
	trustCA(t, opNS, "aistor-ca-tls-registry", e.reg.caPEM)
	dockerConfigSecret(t, e.tenantNS, "regcred", e.reg.host, e.reg.user, e.reg.pass)
	e.updateDir = filepath.Join(os.TempDir(), "osop-e2e-updates-"+opNS)
	e.op = startOperator(t, k8sEnv(opNS, "OPERATOR_RELEASE_MIRROR_URL="+mirror.URL+"/releases"))

	// The image was never pushed: the mirror has the release.
	e.objectStore(t, "mirrored", e.reg.host+"/minio/aistor:"+mirrorRelease, "regcred")
	c := e.waitBinaryCondition(t, "mirrored", metav1.ConditionTrue, "Available")
	assert.Contains(t, c.Message, "source: mirror")
	l := e.listing(t)
	require.Len(t, l.Binaries, 2)
	for _, b := range l.Binaries {
		assert.Equal(t, bins[b.OS+"-"+b.Arch], e.walk(t, b))
		assert.Contains(t, b.Source, "mirror "+mirror.URL)
	}
}

func TestPullKilledHalfwayLeavesNothingListed(t *testing.T) {
	t.Parallel()
	e := newSoloBinEnv(t)
	bin := randomBytes(t, 48<<20)
	image := e.reg.pushImage(t, "minio/big:"+release, imageSpec{binary: bin, releaseLbl: release})
	e.reg.throttle.Store(8 << 20)
	e.objectStore(t, "big", image, "regcred")

	platformDir := filepath.Join(e.updateDir, "linux-amd64")
	require.Eventually(t, func() bool {
		tmp, _ := filepath.Glob(filepath.Join(platformDir, ".minio.*.tmp"))
		return len(tmp) > 0
	}, 30*time.Second, 20*time.Millisecond, "the pull did not start")
	require.NoError(t, e.op.cmd.Process.Signal(syscall.SIGKILL))
	<-e.op.done
	assert.Empty(t, visibleFiles(t, e.updateDir), "a killed pull leaves no visible file")

	e.reg.throttle.Store(0)
	e.op = startOperator(t, e.env)
	for _, b := range e.listing(t).Binaries {
		assert.Equal(t, binstoretest.SHA256(bin), b.SHA256, "nothing half-pulled is listed after the restart")
	}
	e.waitBinaryCondition(t, "big", metav1.ConditionTrue, "Available")
	l := e.listing(t)
	require.Len(t, l.Binaries, 1)
	assert.Equal(t, bin, e.walk(t, l.Binaries[0]))
	tmp, _ := filepath.Glob(filepath.Join(platformDir, ".minio.*.tmp"))
	assert.Empty(t, tmp, "the interrupted pull's temporary file was cleaned up")
}
