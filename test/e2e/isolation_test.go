package e2e

import (
	"archive/tar"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
)

// Issue 19, "one tenant can hurt only itself": what a tenant's image or
// registry can make the operator do to every other tenant.

// TestZstdWindowBombFromSixteenKiBIsRefusedWithinMemory: a 16 KiB zstd
// layer whose frame declares a 512 MiB window and expands to 512 MiB of
// zeros. A decoder without a window bound allocates the window (the issue
// saw 26 MB become 552 MB; the chart's limit is 512 Mi and every replica
// pulls every image). The layer is refused as ImageTooLarge, naming the
// window, and the operator's peak RSS stays under 128 MiB.
func TestZstdWindowBombFromSixteenKiBIsRefusedWithinMemory(t *testing.T) {
	t.Parallel()
	e := newSoloBinEnv(t)
	bomb := zstdWindowBomb(29, 512<<20)
	require.Less(t, len(bomb), 17<<10, "the bomb is about 16 KiB")
	image := e.reg.pushLayerImage(t, "minio/bomb:"+release, bomb, types.OCILayerZStd)
	before := procStatusKiB(t, e.op.cmd.Process.Pid, "VmHWM")

	e.objectStore(t, "bomb", image, "regcred")
	c := e.waitBinaryCondition(t, "bomb", metav1.ConditionFalse, "")
	peak := procStatusKiB(t, e.op.cmd.Process.Pid, "VmHWM")
	t.Logf("operator peak RSS: %d MiB before the pull, %d MiB after", before/1024, peak/1024)
	assert.Less(t, peak, 128<<10, "peak RSS (KiB) of the operator stays under 128 MiB")
	assert.Equal(t, "ImageTooLarge", c.Reason, c.Message)
	assert.Contains(t, c.Message, "512 MiB", "the message names the declared window")
	assert.Contains(t, c.Message, "8 MiB", "and the limit")
	assert.Empty(t, e.listing(t).Binaries)
}

// zstdWindowBomb is one zstd frame declaring a window of 1<<windowLog
// bytes, holding a tar entry of size zero bytes as RLE blocks of 128 KiB
// (4 bytes each), then the tar end marker.
func zstdWindowBomb(windowLog uint, size int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x28, 0xb5, 0x2f, 0xfd}) // magic
	b.WriteByte(0)                          // no content size, not single-segment, no checksum, no dictionary
	b.WriteByte(byte(windowLog-10) << 3)    // window descriptor: exponent, mantissa 0
	block := func(last bool, typ, size int, content []byte) {
		h := uint32(size)<<3 | uint32(typ)<<1
		if last {
			h |= 1
		}
		b.Write([]byte{byte(h), byte(h >> 8), byte(h >> 16)})
		b.Write(content)
	}
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Name: "var/zeros", Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}); err != nil {
		panic(err)
	}
	block(false, 0, hdr.Len(), hdr.Bytes()) // raw block: the tar header
	for left := size; left > 0; left -= 128 << 10 {
		block(false, 1, min(left, 128<<10), []byte{0}) // RLE block of zeros
	}
	block(true, 1, 1024, []byte{0}) // the tar end marker
	return b.Bytes()
}

// pushLayerImage pushes a linux/amd64 OCI image whose one layer is blob.
func (r *testRegistry) pushLayerImage(t testing.TB, repoTag string, blob []byte, mt types.MediaType) string {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(blob, mt))
	require.NoError(t, err)
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Labels = map[string]string{"release": release}
	img, err = mutate.ConfigFile(img, cfg)
	require.NoError(t, err)
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img, r.pushOpts...))
	return ref.String()
}

// TestSilentRegistriesUnderTwoNamesStarveNoOtherNamespace: four
// registries accept TCP and never answer, each named twice (127.0.0.1:port
// and localhost:port) by ObjectStores of one namespace, with the default
// 10 minute pull timeout. Pull slots were capped per registry name, so
// the eight names held every slot (and every worker) until the timeout,
// again after every tag change. Another namespace's image lands within
// 30 s, and the silent namespace never holds more than its share.
func TestSilentRegistriesUnderTwoNamesStarveNoOtherNamespace(t *testing.T) {
	e := newBinEnv(t)
	attacker := &binEnv{tenantNS: operatorNamespace(t)}
	var silent []*silentListener
	for i := range 4 {
		l := listenSilently(t)
		silent = append(silent, l)
		for _, host := range []string{"127.0.0.1", "localhost"} {
			attacker.objectStore(t, fmt.Sprintf("silent-%d-%s", i, strings.ReplaceAll(host, ".", "-")),
				fmt.Sprintf("%s:%d/minio/aistor:%s", host, l.port, release))
		}
	}
	contacted := func() int {
		n := 0
		for _, l := range silent {
			if l.accepted.Load() > 0 {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return contacted() > 0 }, 20*time.Second, 20*time.Millisecond, "the silent registries are being pulled from")

	image := e.reg.pushImage(t, "minio/aistor:"+release, imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: release})
	start := time.Now()
	e.objectStore(t, "healthy", image, "regcred")
	var c metav1.Condition
	require.Eventually(t, func() bool {
		c = conditionOf(t, e.tenantNS, "healthy", apiv1.ConditionBinaryAvailable)
		return c.Status == metav1.ConditionTrue
	}, 30*time.Second, 50*time.Millisecond, "the healthy tenant's binary lands within 30 s; have %+v", c)
	t.Logf("healthy tenant served %s after its ObjectStore was created", time.Since(start).Round(time.Millisecond))
	assert.Equal(t, 1, contacted(), "the silent namespace holds one pull slot (OPERATOR_PULL_SLOTS_PER_NAMESPACE=1): one silent registry was ever contacted")
}

// silentListener accepts TCP connections and never answers.
type silentListener struct {
	port     int
	accepted atomic.Int64
}

func listenSilently(t testing.TB) *silentListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &silentListener{port: ln.Addr().(*net.TCPAddr).Port}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l
}

// TestRegistryRedirectToAnInternalServerLeaksNothing: a tenant's registry
// redirects manifest requests, or sends its token requests, to a server
// only the operator can reach (here "localhost", trusted like an
// in-cluster service), whose answers carry a marker. Registry errors used
// to be quoted whole into the BinaryAvailable condition and its Event, so
// the tenant could read the operator's network. Now the marker appears in
// no condition and no Event; what a registry's own errors[] say appears
// bounded, and never a raw body.
func TestRegistryRedirectToAnInternalServerLeaksNothing(t *testing.T) {
	t.Parallel()
	e := newSoloBinEnv(t)
	const marker = "INTERNAL-SECRET-7f3a9c"
	now := time.Now()

	secretCert, secretKey, _ := testutil.KeyPair(t, nil, []string{"localhost"}, now.Add(-time.Hour), now.Add(time.Hour))
	trustCA(t, e.opNS, "aistor-ca-tls-internal", secretCert)
	internal := httpsServer(t, secretCert, secretKey, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/not-found":
			http.Error(w, "internal service says "+marker, http.StatusNotFound)
		case "/errors":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"errors":[{"code":"DENIED","message":"%s"}]}`, marker)
		case "/manifest":
			w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
			fmt.Fprintf(w, `{"schemaVersion":"%s"}`, marker)
		case "/token":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"internal":"%s"}`, marker)
		default:
			http.NotFound(w, r)
		}
	}))
	_, internalPort, _ := net.SplitHostPort(internal)
	internalURL := "https://localhost:" + internalPort

	regCert, regKey, _ := testutil.KeyPair(t, nil, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))
	trustCA(t, e.opNS, "aistor-ca-tls-evil", regCert)
	long := strings.Repeat("m", 20000) + marker
	evil := httpsServer(t, regCert, regKey, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		repo, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v2/"), "/manifests/")
		switch repo {
		case "to-not-found", "to-errors", "to-manifest":
			http.Redirect(w, r, internalURL+"/"+strings.TrimPrefix(repo, "to-"), http.StatusTemporaryRedirect)
		case "raw":
			http.Error(w, "registry stack trace: "+marker, http.StatusInternalServerError)
		case "long":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			var errs []string
			for range 3 {
				errs = append(errs, fmt.Sprintf(`{"code":"MANIFEST_UNKNOWN","message":"%s","detail":{"internal":"%s"}}`, long, marker))
			}
			fmt.Fprintf(w, `{"errors":[%s]}`, strings.Join(errs, ","))
		default:
			http.NotFound(w, r)
		}
	}))
	tokens := httpsServer(t, regCert, regKey, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="registry"`, internalURL))
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"token required"}]}`, http.StatusUnauthorized)
	}))

	stores := map[string]string{
		"redirect-not-found": evil + "/to-not-found:" + release,
		"redirect-errors":    evil + "/to-errors:" + release,
		"redirect-manifest":  evil + "/to-manifest:" + release,
		"raw-body":           evil + "/raw:" + release,
		"long-errors":        evil + "/long:" + release,
		"token-realm":        tokens + "/minio/aistor:" + release,
	}
	for s, image := range stores {
		e.objectStore(t, s, image)
	}
	for s := range stores {
		c := e.waitBinaryCondition(t, s, metav1.ConditionFalse, "")
		t.Logf("%s: %s: %s", s, c.Reason, c.Message)
		assert.NotContains(t, c.Message, marker, "%s: the condition quotes nothing the internal server or a raw body said", s)
		assert.Less(t, len(c.Message), 2048, "%s: the message is bounded", s)
	}
	long0 := conditionOf(t, e.tenantNS, "long-errors", apiv1.ConditionBinaryAvailable)
	assert.Equal(t, "ImageNotFound", long0.Reason)
	assert.Contains(t, long0.Message, "MANIFEST_UNKNOWN", "the registry's own error code is quoted")
	assert.Contains(t, long0.Message, "mmmm", "and the start of its message")

	// Every ObjectStore got its Event; none quotes the marker.
	require.Eventually(t, func() bool {
		events, err := adminClient(t).CoreV1().Events(e.tenantNS).List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		seen := map[string]bool{}
		for _, ev := range events.Items {
			seen[ev.InvolvedObject.Name] = true
		}
		for s := range stores {
			if !seen[s] {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "an Event for every ObjectStore")
	events, err := adminClient(t).CoreV1().Events(e.tenantNS).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, ev := range events.Items {
		assert.NotContains(t, ev.Message, marker, "Event %s of %s", ev.Reason, ev.InvolvedObject.Name)
		assert.Less(t, len(ev.Message), 2048, "Event %s of %s is bounded", ev.Reason, ev.InvolvedObject.Name)
	}
}

// TestATokenServiceOnAnotherHostThanTheRegistryIsNotAsked: a registry
// names, as its token service (WWW-Authenticate realm), an in-cluster
// HTTPS service the operator trusts and that hands out a token to an
// unauthenticated GET. The operator used to fetch it and send it back to
// the tenant's registry as "Authorization: Bearer <token>", a channel out
// of the cluster network (found as
// TestAttackTokenRealmForwardsAnInternalServersTokenToTheRegistry). A
// token service is now asked only on the registry's own host (any port;
// Docker Hub's auth.docker.io for Docker Hub): the pull fails as
// AuthFailed naming the realm's host, the internal server is never
// contacted, and nothing of it reaches the registry.
func TestATokenServiceOnAnotherHostThanTheRegistryIsNotAsked(t *testing.T) {
	t.Parallel()
	e := newSoloBinEnv(t)
	const marker = "INTERNAL-TOKEN-5e1d"
	now := time.Now()
	internalCert, internalKey, _ := testutil.KeyPair(t, nil, []string{"localhost"}, now.Add(-time.Hour), now.Add(time.Hour))
	trustCA(t, e.opNS, "aistor-ca-tls-internal", internalCert)
	var asked atomic.Int64
	internal := httpsServer(t, internalCert, internalKey, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"token":"%s","access_token":"%s"}`, marker, marker)
	}))
	_, internalPort, _ := net.SplitHostPort(internal)

	regCert, regKey, _ := testutil.KeyPair(t, nil, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))
	trustCA(t, e.opNS, "aistor-ca-tls-evil", regCert)
	var got atomic.Value
	got.Store("")
	evil := httpsServer(t, regCert, regKey, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); strings.Contains(a, marker) {
			got.Store(a)
		}
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="https://localhost:%s/token",service="registry"`, internalPort))
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"token required"}]}`, http.StatusUnauthorized)
	}))
	e.objectStore(t, "token-forward", evil+"/minio/aistor:"+release)
	c := e.waitBinaryCondition(t, "token-forward", metav1.ConditionFalse, "AuthFailed")
	assert.Contains(t, c.Message, "as its token service; tokens are asked of the registry's own host (127.0.0.1, any port) only")
	assert.Zero(t, asked.Load(), "the internal server was not asked for a token")
	assert.Empty(t, got.Load(), "the tenant's registry received what the internal service answered")
}
