// Package testutil holds what the tests of several packages need: a log
// buffer safe for concurrent writers, certificate makers, free loopback
// ports, a fake typed clientset, server-side apply of conditions for fake
// dynamic clients, and the controllers' fake-API fixture (FakeAPI). Only
// tests import it.
package testutil

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Clientset is a fake typed clientset preloaded with objs, over the plain
// object tracker. No controller applies through the typed client (status
// is applied through the dynamic one: ApplyStatus), so nothing needs the
// field management of fake.NewClientset, whose tracker parses the whole
// API schema on its first use: about 0.2 s of CPU in each test binary,
// as much as all the other tests of some packages.
func Clientset(objs ...runtime.Object) *fake.Clientset {
	return fake.NewSimpleClientset(objs...)
}

// LockedBuffer collects a log written from several goroutines.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// KeyPair makes a self-signed certificate for names (IP addresses become
// IP SANs), valid between the times, with the extended key usages given
// (server auth when none), and returns it and its key as PEM. A nil key
// is a new ECDSA P-256 key.
func KeyPair(t testing.TB, key crypto.Signer, names []string, notBefore, notAfter time.Time, usages ...x509.ExtKeyUsage) (certPEM, keyPEM []byte, serial *big.Int) {
	t.Helper()
	if key == nil {
		key = ECKey(t)
	}
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: names[0]},
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: usages,
	}
	setSANs(tmpl, names)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), serial
}

// setSANs puts names into tmpl: IP addresses as IP SANs, the rest as DNS.
func setSANs(tmpl *x509.Certificate, names []string) {
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
}

// CA is a certificate authority for tests, valid for the hour around now.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// PEM is Cert, PEM-encoded.
	PEM []byte
}

// NewCA makes a CA named name with a new ECDSA P-256 key.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := ECKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Leaf is a serving certificate for names (IP addresses become IP SANs)
// signed by the CA, with a new key.
func (c *CA) Leaf(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	key := ECKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	setSANs(tmpl, names)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, key.Public(), c.Key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// ECKey is a new ECDSA P-256 key.
func ECKey(t testing.TB) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return k
}

// FreePorts returns n loopback ports free at the time of the call, for
// servers a test starts a moment later. They are taken in turn from below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range), where
// neither a client's outgoing connection nor another listener on port 0
// can take one in that moment (the end-to-end suite lost an operator to
// "address already in use" that way), and never twice in one process.
func FreePorts(n int) ([]int, error) {
	const low = 10000
	high := ephemeralLow()
	if high-low < 1000 {
		return ephemeralPorts(n)
	}
	span := int64(high - low)
	// Each test process starts at its own place in the range, so two
	// packages' processes running at once rarely meet.
	nextPort.CompareAndSwap(0, 1+mrand.Int64N(span))
	ports := make([]int, 0, n)
	for tries := int64(0); len(ports) < n && tries < span; tries++ {
		p := low + int(nextPort.Add(1)%span)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // in use
		}
		l.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("find %d free loopback ports in %d-%d: found %d", n, low, high-1, len(ports))
	}
	return ports, nil
}

// nextPort is where FreePorts takes the next port from: state of the test
// process, so that no two of its servers are handed one port.
var nextPort atomic.Int64

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	v, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return v
}

// ephemeralPorts is FreePorts where the ephemeral range leaves no room
// below it: ports the kernel picks.
func ephemeralPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ApplyStatusConditions is a reactor for a fake dynamic client: it does
// what the apiserver's server-side apply does with the conditions of a
// status apply (a list keyed by type), merging them into the stored
// object, which the fake client cannot do itself. Install it with
// client.PrependReactor("patch", resource, ApplyStatusConditions(client, gvr)).
func ApplyStatusConditions(client *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource) k8stesting.ReactionFunc {
	return ApplyStatus(client, gvr)
}

// ApplyStatus is ApplyStatusConditions for a field manager that also owns
// the status fields owned: each is replaced by the applied one, or removed
// when the apply leaves it out. As the apiserver does, a resourceVersion
// in the applied object is a precondition (a conflict when the object
// moved on), and every write gives the object a new resourceVersion.
func ApplyStatus(client *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource, owned ...string) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if p.GetPatchType() != types.ApplyPatchType || p.GetSubresource() != "status" {
			return false, nil, nil
		}
		var applied unstructured.Unstructured
		if err := json.Unmarshal(p.GetPatch(), &applied.Object); err != nil {
			return true, nil, err
		}
		obj, err := client.Tracker().Get(gvr, p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		if rv := applied.GetResourceVersion(); rv != "" && rv != u.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), p.GetName(), fmt.Errorf("the object is at %s, not %s", u.GetResourceVersion(), rv))
		}
		for _, field := range owned {
			if v, ok, _ := unstructured.NestedFieldCopy(applied.Object, "status", field); ok {
				_ = unstructured.SetNestedField(u.Object, v, "status", field)
			} else {
				unstructured.RemoveNestedField(u.Object, "status", field)
			}
		}
		have, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		want, _, _ := unstructured.NestedSlice(applied.Object, "status", "conditions")
		for _, w := range want {
			replaced := false
			for i, h := range have {
				if h.(map[string]any)["type"] == w.(map[string]any)["type"] {
					have[i], replaced = w, true
				}
			}
			if !replaced {
				have = append(have, w)
			}
		}
		if err := unstructured.SetNestedSlice(u.Object, have, "status", "conditions"); err != nil {
			return true, nil, err
		}
		BumpResourceVersion(u)
		return true, u, client.Tracker().Update(gvr, u, p.GetNamespace())
	}
}

// BumpResourceVersion gives u the next resourceVersion, as the apiserver
// does on every write (the fake tracker does not).
func BumpResourceVersion(u *unstructured.Unstructured) {
	n, _ := strconv.Atoi(u.GetResourceVersion())
	u.SetResourceVersion(strconv.Itoa(n + 1))
}

// HeapGrowth is how far the heap grew above its level before f, sampled
// every 2 ms while f runs: what one hostile input made the operator hold.
func HeapGrowth(f func()) int64 {
	goruntime.GC()
	var base goruntime.MemStats
	goruntime.ReadMemStats(&base)
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m goruntime.MemStats
		for {
			goruntime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return int64(peak.Load()) - int64(base.HeapAlloc)
}
