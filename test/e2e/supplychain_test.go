package e2e

import (
	"bufio"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/upgradeserver"
)

// TestOneTenantCannotPlantABinaryForAnother: two tenants' images claim the
// same release with different bytes. Neither blocks the other: each is
// served its own bytes at its own digest URL, and the release's plain path
// is withheld rather than served from whichever came first.
func TestOneTenantCannotPlantABinaryForAnother(t *testing.T) {
	e := newBinEnv(t)
	planted, official := randomBytes(t, 1<<20), randomBytes(t, 1<<20)
	evil := e.reg.pushImage(t, "tenant-a/minio:any-tag", imageSpec{binary: planted, releaseLbl: release})
	e.objectStore(t, "first", evil, "regcred")
	e.waitBinaryCondition(t, "first", metav1.ConditionTrue, "Available")

	other := operatorNamespace(t)
	dockerConfigSecret(t, other, "regcred", e.reg.host, e.reg.user, e.reg.pass)
	victim := &binEnv{tenantNS: other}
	good := e.reg.pushImage(t, "minio/aistor:"+release, imageSpec{binary: official, releaseLbl: release})
	victim.objectStore(t, "second", good, "regcred")
	victim.waitBinaryCondition(t, "second", metav1.ConditionTrue, "Available")

	c := e.op.client(t, testCluster.KubeletServingCA, 4)
	firstURL := waitBinaryStatus(t, e.tenantNS, "first", planted).URL
	secondURL := waitBinaryStatus(t, other, "second", official).URL
	assert.Equal(t, official, updateClientWalk(t, c, secondURL), "the second tenant is served its own bytes")
	assert.Equal(t, planted, updateClientWalk(t, c, firstURL), "the first keeps its own")
	l := e.listing(t)
	assert.Empty(t, l.Binaries, "the release claimed with different bytes is not served by name")
	require.Len(t, l.Withheld, 1)
	assert.Contains(t, l.Withheld[0].Reason, "2 different binaries")

	// A tenant that cannot pull the first image itself does not get it
	// through the store: same release, same bytes, but no credentials.
	third := operatorNamespace(t)
	stranger := &binEnv{tenantNS: third}
	hidden := e.reg.pushImage(t, privateRepos+"tenant-a/minio:any-tag", imageSpec{binary: planted, releaseLbl: release})
	stranger.objectStore(t, "no-credentials", hidden)
	stranger.waitBinaryCondition(t, "no-credentials", metav1.ConditionFalse, "AuthFailed")
	assert.Nil(t, binaryStatus(t, third, "no-credentials"), "no binary named for a tenant that could not pull")
}

// TestSwappedBlobLandsNothing: a registry serves other bytes under the
// digest of the layer that holds the binary (validly signed bytes even);
// the pinned reference's digest check stops it.
func TestSwappedBlobLandsNothing(t *testing.T) {
	t.Parallel()
	e := newSoloBinEnv(t)
	image := e.reg.pushImage(t, "minio/swapped:"+release, imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: release})
	ref, err := name.ParseReference(image)
	require.NoError(t, err)
	img, err := remote.Image(ref, e.reg.pushOpts...)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	binaryLayer, err := layers[len(layers)-1].Digest()
	require.NoError(t, err)
	digest, err := img.Digest()
	require.NoError(t, err)
	// The swapped blob is a well-formed layer with another signed binary.
	impostor := buildImage(t, imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: release}, "linux", "amd64")
	impLayers, err := impostor.Layers()
	require.NoError(t, err)
	rc, err := impLayers[len(impLayers)-1].Compressed()
	require.NoError(t, err)
	swapped, err := io.ReadAll(rc)
	require.NoError(t, err)
	e.reg.swap.Store(binaryLayer.String(), swapped)

	pinned := ref.Context().Digest(digest.String()).String()
	e.objectStore(t, "swapped", pinned, "regcred")
	c := e.waitBinaryCondition(t, "swapped", metav1.ConditionFalse, "ChecksumMismatch")
	assert.Contains(t, c.Message, binaryLayer.String())
	assert.Empty(t, e.listing(t).Binaries)
	assert.Empty(t, visibleFiles(t, e.updateDir), "nothing landed in the store")
}

// TestHangingRegistryDoesNotHoldOtherTenants: a registry that accepts
// connections and never answers ends at the pull deadline with a reason,
// and another tenant's (namespace's) pull completes meanwhile.
func TestHangingRegistryDoesNotHoldOtherTenants(t *testing.T) {
	e := newBinEnv(t, "OPERATOR_PULL_TIMEOUT=4s")
	hang := make(chan struct{})
	now := time.Now()
	certPEM, keyPEM, _ := testutil.KeyPair(t, nil, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))
	hanging := httpsServer(t, certPEM, keyPEM, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang) })
	trustCA(t, e.opNS, "aistor-ca-tls-hanging", certPEM)

	e.objectStore(t, "stuck", hanging+"/minio/aistor:"+release)
	other := &binEnv{tenantNS: operatorNamespace(t)}
	dockerConfigSecret(t, other.tenantNS, "regcred", e.reg.host, e.reg.user, e.reg.pass)
	other.objectStore(t, "healthy", e.reg.pushImage(t, "minio/aistor:"+release, imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: release}), "regcred")
	other.waitBinaryCondition(t, "healthy", metav1.ConditionTrue, "Available")
	ready := e.op.ready()
	assert.NotEqual(t, "PullTimeout", conditionOf(t, e.tenantNS, "stuck", apiv1.ConditionBinaryAvailable).Reason,
		"the healthy tenant was served before the hanging registry's deadline ran out")
	assert.True(t, ready, "a pull that hangs holds no readiness: the upgrade port stays up for every other tenant")
	c := e.waitBinaryCondition(t, "stuck", metav1.ConditionFalse, "PullTimeout")
	assert.Contains(t, c.Message, "4s")
}

// TestNoPlainHTTPFallbackForPrivateRegistries: a registry on a loopback
// (private) address whose HTTPS certificate is not trusted also answers
// plain HTTP on the same port. go-containerregistry would fall back to it;
// the operator must not.
func TestNoPlainHTTPFallbackForPrivateRegistries(t *testing.T) {
	e := newBinEnv(t)
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var plain atomic.Int64
	now := time.Now()
	certPEM, keyPEM, _ := testutil.KeyPair(t, nil, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour)) // trusted by no one
	host := dualServer(t, certPEM, keyPEM, inner, &plain)
	ref, err := name.ParseReference(host+"/minio/aistor:"+release, name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, buildImage(t, imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: release}, "linux", "amd64")))
	plain.Store(0)

	e.objectStore(t, "downgrade", host+"/minio/aistor:"+release)
	c := e.waitBinaryCondition(t, "downgrade", metav1.ConditionFalse, "RegistryNotTrusted")
	assert.Contains(t, c.Message, "aistor-ca-tls")
	assert.Zero(t, plain.Load(), "no request reached the registry over plain HTTP")
	assert.Empty(t, e.listing(t).Binaries)

	// Listed as insecure, the same registry is used over HTTP. Operators
	// watch ObjectStores cluster-wide and each leads its own namespace's
	// lease, so the first one is stopped: it would report its own verdict on
	// the second environment's ObjectStore.
	e.op.stop()
	listed := newBinEnv(t, "OPERATOR_INSECURE_REGISTRIES="+host)
	listed.objectStore(t, "insecure-ok", host+"/minio/aistor:"+release)
	listed.waitBinaryCondition(t, "insecure-ok", metav1.ConditionTrue, "Available")
	assert.Positive(t, plain.Load())
}

// TestThreeReplicasServeTheSameVerifiedSet: three operator processes with
// their own store directories. Each fills its own store; a replica that
// starts later is not ready until it serves what the leader serves; after
// the leader is killed the others keep serving and one of them takes over
// the status writes.
func TestThreeReplicasServeTheSameVerifiedSet(t *testing.T) {
	ensureCRD(t)
	reg := startRegistry(t)
	opNS, tenantNS := operatorNamespace(t), operatorNamespace(t)
	trustCA(t, opNS, "aistor-ca-tls-registry", reg.caPEM)
	dockerConfigSecret(t, tenantNS, "regcred", reg.host, reg.user, reg.pass)
	env := func() []string {
		return k8sEnv(opNS, "OPERATOR_UPDATE_DIR="+filepath.Join(t.TempDir(), "store"),
			"OPERATOR_LEASE_DURATION=3s", "OPERATOR_LEASE_RENEW_DEADLINE=2s", "OPERATOR_LEASE_RETRY_PERIOD=200ms")
	}
	ops := []*operator{startOperator(t, env()), startOperator(t, env()), startOperator(t, env())}

	// About two seconds of pulling, so the late replica's wait can be seen.
	reg.throttle.Store(8 << 20)
	image := reg.pushImage(t, "minio/aistor:"+release, imageSpec{binary: randomBytes(t, 16<<20), releaseLbl: release})
	e := &binEnv{tenantNS: tenantNS, reg: reg, opNS: opNS}
	start := time.Now()
	e.objectStore(t, "tenant", image, "regcred")
	base := "https://" + serviceName + "." + opNS + ".svc.cluster.local"
	listed := make([]upgradeserver.Listing, len(ops))
	require.Eventually(t, func() bool {
		done := 0
		for i, op := range ops {
			if l, err := getListing(op.client(t, testCluster.KubeletServingCA, 1), base); err == nil && len(l.Binaries) > 0 {
				listed[i] = l
				done++
			}
		}
		return done == len(ops)
	}, 30*time.Second, 20*time.Millisecond, "every replica lists the release")
	t.Logf("image change to listed on all three replicas: %s", time.Since(start).Round(time.Millisecond))
	for i := range ops {
		require.Len(t, listed[i].Binaries, 1)
		assert.Equal(t, listed[0].Binaries[0].SHA256, listed[i].Binaries[0].SHA256, "replica %d serves the same bytes", i)
		assert.Eventually(t, ops[i].ready, 5*time.Second, 20*time.Millisecond, "replica %d is ready", i)
	}
	e.waitBinaryCondition(t, "tenant", metav1.ConditionTrue, "Available")

	// A replica that starts now (a new pod, an emptyDir after a restart)
	// takes no traffic until it serves what the leader reported available.
	late := launchOperator(t, env())
	sawWaiting := false
	require.Eventually(t, func() bool {
		ready, why := late.readyz()
		sawWaiting = sawWaiting || strings.Contains(why, "the leader serves are not in this replica's store yet ("+tenantNS+"/tenant)")
		return ready
	}, 30*time.Second, 20*time.Millisecond, "the late replica becomes ready")
	l := listing(t, late.client(t, testCluster.KubeletServingCA, 1), base)
	require.Len(t, l.Binaries, 1, "ready only with the release in its store")
	assert.Equal(t, listed[0].Binaries[0].SHA256, l.Binaries[0].SHA256)
	assert.True(t, sawWaiting, "/readyz named the release it was still pulling")
	reg.throttle.Store(0)
	ops = append(ops, late)

	leader := -1
	for i, op := range ops {
		if counter(t, op, "objectstore_operator_leader") == 1 {
			leader = i
		}
	}
	require.GreaterOrEqual(t, leader, 0)
	require.NoError(t, ops[leader].cmd.Process.Signal(syscall.SIGKILL))
	<-ops[leader].done
	var survivors []*operator
	for i, op := range ops {
		if i != leader {
			survivors = append(survivors, op)
			l := listing(t, op.client(t, testCluster.KubeletServingCA, 1), base)
			require.Len(t, l.Binaries, 1, "replica %d still serves after the leader died", i)
			assert.Equal(t, listed[0].Binaries[0].SHA256, l.Binaries[0].SHA256)
			assert.Equal(t, listed[0].Binaries[0].Size, int64(len(updateClientWalk(t, op.client(t, testCluster.KubeletServingCA, 1), l.Binaries[0].SHA256SumURL))))
		}
	}
	// The new leader writes conditions: a new problem gets reported.
	e.objectStore(t, "missing", reg.host+"/minio/missing:"+release, "regcred")
	e.waitBinaryCondition(t, "missing", metav1.ConditionFalse, "ImageNotFound")
	leaders := 0.0
	for _, op := range survivors {
		leaders += counter(t, op, "objectstore_operator_leader")
		assert.Eventually(t, op.ready, 10*time.Second, 20*time.Millisecond, "a replica with every release (or a reported reason) is ready")
	}
	assert.Equal(t, 1.0, leaders, "one of the survivors leads")
}

// httpsServer serves h over TLS on loopback and returns its host:port.
func httpsServer(t testing.TB, certPEM, keyPEM []byte, h http.Handler) string {
	t.Helper()
	cfg, err := tlsKeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, TLSConfig: cfg}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// dualServer answers TLS and plain HTTP on one loopback port, telling them
// apart by the first byte (0x16 opens a TLS handshake); plain counts the
// plain-HTTP requests.
func dualServer(t testing.TB, certPEM, keyPEM []byte, h http.Handler, plain *atomic.Int64) string {
	t.Helper()
	cfg, err := tlsKeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tlsConns, plainConns := newChanListener(ln.Addr()), newChanListener(ln.Addr())
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				tlsConns.Close()
				plainConns.Close()
				return
			}
			go func() {
				br := bufio.NewReader(conn)
				first, err := br.Peek(1)
				if err != nil {
					conn.Close()
					return
				}
				c := &peekedConn{Conn: conn, r: br}
				target := plainConns
				if first[0] == 0x16 {
					target = tlsConns
				}
				select {
				case target.conns <- c:
				case <-target.closed:
					conn.Close()
				}
			}()
		}
	}()
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plain.Add(1)
		h.ServeHTTP(w, r)
	})
	secure, insecure := &http.Server{Handler: h}, &http.Server{Handler: counted}
	go func() { _ = secure.Serve(tls.NewListener(tlsConns, cfg)) }()
	go func() { _ = insecure.Serve(plainConns) }()
	t.Cleanup(func() {
		ln.Close()
		secure.Close()
		insecure.Close()
	})
	return ln.Addr().String()
}

type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener hands out connections accepted elsewhere.
type chanListener struct {
	addr   net.Addr
	conns  chan net.Conn
	closed chan struct{}
	once   atomic.Bool
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	if l.once.CompareAndSwap(false, true) {
		close(l.closed)
	}
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
