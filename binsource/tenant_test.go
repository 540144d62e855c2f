package binsource

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"aead.dev/minisign"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
	"github.com/object-store-operator/operator/internal/tenant"
)

// acmeUnits is the Controller's UnitOf with namespaces ns-1, ns-2 and
// ns-3 labelled as tenant acme, and namespace other unlabelled.
func acmeUnits(t *testing.T) *Controller {
	t.Helper()
	namespaces := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range []string{"ns-1", "ns-2", "ns-3"} {
		require.NoError(t, namespaces.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"platform.example/tenant": "acme"}}}))
	}
	require.NoError(t, namespaces.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}))
	return &Controller{cfg: ControllerConfig{UnitOf: tenant.New("platform.example/tenant", tenant.PerTenant, namespaces).Unit}}
}

// TestATenantsNamespacesShareOneStoreShare (issue 29 point 3): three
// namespaces of one labelled tenant land no more than one share between
// them; an unlabelled namespace has its own.
func TestATenantsNamespacesShareOneStoreShare(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	key := binstoretest.NewKey(t)
	image := func(i int) string {
		bin := bytes.Repeat([]byte{byte('0' + i)}, 100)
		img := singleLayerImage(t, gzipTar(t, map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": key.Sign(t, bin)}, 0))
		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		rel := fmt.Sprintf("RELEASE.2025-0%d-01T00-00-00Z", i)
		cfg.OS, cfg.Architecture, cfg.Config.Labels = "linux", "amd64", map[string]string{"release": rel}
		img, err = mutate.ConfigFile(img, cfg)
		require.NoError(t, err)
		ref, err := name.ParseReference(host+"/minio/aistor:"+rel, name.Insecure)
		require.NoError(t, err)
		require.NoError(t, remote.Write(ref, img))
		return ref.String()
	}
	f := testFetcher(t, binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}}, FetcherConfig{
		Platforms: []Platform{{"linux", "amd64"}}, InsecureRegistries: []string{host}, Concurrency: 4, NamespaceMaxBytes: 200,
	})
	c := acmeUnits(t)
	anonymous := &keychain{Keychain: authn.NewMultiKeychain()}
	pull := func(key, image string) error {
		t.Helper()
		ns, _, _ := strings.Cut(key, "/")
		type result struct {
			res *Result
			err error
		}
		got := make(chan result, 1)
		f.Submit(t.Context(), ns, c.unit(key), image, anonymous, func(res *Result, err error) { got <- result{res, err} })
		select {
		case r := <-got:
			if r.err == nil {
				f.reference(key, c.unit(key), r.res.Binaries)
			}
			return r.err
		case <-time.After(10 * time.Second):
			t.Fatalf("the pull for %s did not end", key)
			return nil
		}
	}

	require.NoError(t, pull("ns-1/s", image(1)))
	require.NoError(t, pull("ns-2/s", image(2)))
	err := pull("ns-3/s", image(3))
	require.Error(t, err, "the tenant's share is taken by its other namespaces")
	assert.Equal(t, "StoreFull", reasonOf(err))
	assert.Contains(t, err.Error(), "tenant acme's ObjectStores use 200 bytes of its share of 200 bytes")
	require.NoError(t, pull("other/s", image(3)), "another tenant has its own share")
}

// TestATenantsNamespacesShareOnePullShare (issue 29 point 3): with one
// pull slot per unit, three namespaces of one labelled tenant run one
// pull at a time between them; another tenant's runs beside.
func TestATenantsNamespacesShareOnePullShare(t *testing.T) {
	// Its own registry and fetcher, no memory measured: it runs beside
	// the others.
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a registry that answers nothing until the test ends
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "gone", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	host := strings.TrimPrefix(srv.URL, "http://")
	f := testFetcher(t, binstore.Options{}, FetcherConfig{
		Platforms: []Platform{{"linux", "amd64"}}, InsecureRegistries: []string{host}, Concurrency: 8, PerNamespace: 1,
	})
	c := acmeUnits(t)
	anonymous := &keychain{Keychain: authn.NewMultiKeychain()}
	submit := func(key string) {
		ns, _, _ := strings.Cut(key, "/")
		withdraw := f.Submit(t.Context(), ns, c.unit(key), host+"/minio/aistor:RELEASE.X", anonymous, func(*Result, error) {})
		t.Cleanup(withdraw)
	}
	holds := func(running, queued int) func() bool {
		return func() bool { r, q := f.queue.stats(); return r == running && q == queued }
	}

	for _, key := range []string{"ns-1/s", "ns-2/s", "ns-3/s"} {
		submit(key)
	}
	require.Eventually(t, holds(1, 2), 5*time.Second, 5*time.Millisecond, "one pull of the tenant runs, its others wait")
	require.Never(t, holds(2, 1), 100*time.Millisecond, 5*time.Millisecond, "although slots are free")
	submit("other/s")
	require.Eventually(t, holds(2, 2), 5*time.Second, 5*time.Millisecond, "another tenant's pull runs at once")
}
