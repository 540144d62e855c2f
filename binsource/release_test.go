package binsource

import (
	"io"
	"log"
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
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// TestAReleaseFromTheFutureIsRefused (issue 29): an image labelled with
// a release time more than an hour ahead of the operator's clock is
// ReleaseInFuture and lands nothing (its name would sort after every real
// release); within the hour it is a release like any other.
func TestAReleaseFromTheFutureIsRefused(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	key := binstoretest.NewKey(t)
	push := func(rel string) string {
		bin := []byte("the binary of " + rel)
		img := singleLayerImage(t, gzipTar(t, map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": key.Sign(t, bin)}, 0))
		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		cfg.OS, cfg.Architecture, cfg.Config.Labels = "linux", "amd64", map[string]string{"release": rel}
		img, err = mutate.ConfigFile(img, cfg)
		require.NoError(t, err)
		ref, err := name.ParseReference(host+"/minio/aistor:at-"+strings.ToLower(rel[len("RELEASE."):]), name.Insecure)
		require.NoError(t, err)
		require.NoError(t, remote.Write(ref, img))
		return ref.String()
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := testFetcher(t, binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}}, FetcherConfig{
		Platforms: []Platform{{"linux", "amd64"}}, InsecureRegistries: []string{host}, Concurrency: 2, Clock: clocktesting.NewFakePassiveClock(now),
	})
	pull := func(image string) (*Result, error) {
		t.Helper()
		type result struct {
			res *Result
			err error
		}
		got := make(chan result, 1)
		f.Submit(t.Context(), "t", "", image, &keychain{Keychain: authn.NewMultiKeychain()}, func(res *Result, err error) { got <- result{res, err} })
		select {
		case r := <-got:
			return r.res, r.err
		case <-time.After(10 * time.Second):
			t.Fatal("the pull did not end")
			return nil, nil
		}
	}

	_, err := pull(push("RELEASE.2099-01-01T00-00-00Z"))
	require.Error(t, err)
	assert.Equal(t, "ReleaseInFuture", reasonOf(err))
	assert.Contains(t, err.Error(), "RELEASE.2099-01-01T00-00-00Z names 2099-01-01T00:00:00Z, more than 1h0m0s after the operator's clock (2026-01-01T00:00:00Z)")
	_, err = pull(push("RELEASE.2026-01-01T01-30-00Z"))
	assert.Equal(t, "ReleaseInFuture", reasonOf(err), "more than an hour ahead")
	assert.Empty(t, f.cfg.Store.Current().All(), "nothing landed")

	res, err := pull(push("RELEASE.2026-01-01T00-30-00Z"))
	require.NoError(t, err, "clocks differ: half an hour ahead is a release")
	assert.Equal(t, "RELEASE.2026-01-01T00-30-00Z", res.Release)
}
