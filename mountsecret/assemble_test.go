package mountsecret

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/object-store-operator/operator/internal/secretcache"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/testutil"
)

func pair(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, _ = testutil.KeyPair(t, nil, []string{name}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	return certPEM, keyPEM
}

// secretsOf reads Secrets the way the controller does: metadata from an
// informer's indexer, data from a fake apiserver.
func secretsOf(t *testing.T, secrets ...*corev1.Secret) secretGetter {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	client := testutil.Clientset()
	for _, s := range secrets {
		created, err := client.CoreV1().Secrets(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, idx.Add(&metav1.PartialObjectMetadata{ObjectMeta: created.ObjectMeta}))
	}
	return secretcache.NewReader(idx, client, contentHash, secretcache.Limits{})
}

func secret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t"}, Data: data}
}

func store(server, client, cas []string) *v1.ObjectStore {
	refs := func(names []string) []v1.SecretRef {
		var out []v1.SecretRef
		for _, n := range names {
			out = append(out, v1.SecretRef{Name: n})
		}
		return out
	}
	return &v1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "t"},
		Spec:       v1.ObjectStoreSpec{Certificates: v1.Certificates{Server: refs(server), Client: refs(client), TrustedCAs: refs(cas)}},
	}
}

func TestAssemblyLayoutAndDeterminism(t *testing.T) {
	c1, k1 := pair(t, "one")
	c2, k2 := pair(t, "two")
	c3, k3 := pair(t, "client")
	ca, _ := pair(t, "ca")
	l := secretsOf(t,
		secret("one", map[string][]byte{"tls.crt": c1, "tls.key": k1, "ca.crt": ca}),
		secret("two", map[string][]byte{"public.crt": c2, "private.key": k2}),
		secret("cl", map[string][]byte{"tls.crt": c3, "tls.key": k3}),
		secret("kms", map[string][]byte{"ca.crt": append(append([]byte{}, ca...), c1...)}),
	)
	os := store([]string{"one", "two"}, []string{"cl"}, []string{"kms"})
	a, err := assemble(context.Background(), os, l, []byte("operator-ca"))
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{
		"public.crt": c1, "private.key": k1, "CAs.server.one.crt": ca,
		"two.public.crt": c2, "two.private.key": k2,
		"client.cl.crt": c3, "client.cl.key": k3,
		"CAs.trusted.kms.crt": append(append([]byte{}, ca...), c1...),
		"CAs.operator.crt":    []byte("operator-ca"),
	}, a.data)

	again, err := assemble(context.Background(), os, l, []byte("operator-ca"))
	require.NoError(t, err)
	assert.Equal(t, a.hash, again.hash, "same inputs, same hash")
	assert.Equal(t, a.sourcesJSON(), again.sourcesJSON())

	changed, err := assemble(context.Background(), os, l, []byte("new-operator-ca"))
	require.NoError(t, err)
	assert.NotEqual(t, a.hash, changed.hash)
	assert.Equal(t, []string{"operator CA"}, changedSources(a.sourcesJSON(), changed.sources))
}

func TestAssemblyProblemsNameTheSecret(t *testing.T) {
	c1, k1 := pair(t, "one")
	_, otherKey := pair(t, "other")
	tests := []struct {
		name       string
		secrets    []*corev1.Secret
		os         *v1.ObjectStore
		wantSecret string
		wantReason string
		wantDetail string
		wantError  string
	}{
		{"missing server Secret", nil, store([]string{"one"}, nil, nil), "one", "SecretNotFound", "not found",
			"Secret one (named by spec.certificates.server[0]): not found in namespace t"},
		{"missing second trusted CA", []*corev1.Secret{secret("kms", map[string][]byte{"ca.crt": c1})},
			store(nil, nil, []string{"kms", "vault-ca"}), "vault-ca", "SecretNotFound", "not found",
			"Secret vault-ca (named by spec.certificates.trustedCAs[1]): not found in namespace t"},
		{"key of another certificate", []*corev1.Secret{secret("one", map[string][]byte{"tls.crt": c1, "tls.key": otherKey})},
			store([]string{"one"}, nil, nil), "one", "SecretMalformed", "belongs to another certificate", "(named by spec.certificates.server[0])"},
		{"client without keys", []*corev1.Secret{secret("cl", map[string][]byte{"foo": []byte("bar")})},
			store(nil, []string{"cl"}, nil), "cl", "SecretMalformed", "no tls.crt/tls.key", "Secret cl (named by spec.certificates.client[0])"},
		{"CA with garbage", []*corev1.Secret{secret("kms", map[string][]byte{"ca.crt": []byte("garbage")})},
			store(nil, nil, []string{"kms"}), "kms", "SecretMalformed", "not PEM", "spec.certificates.trustedCAs[0]"},
		{"CA Secret without certificates", []*corev1.Secret{secret("kms", map[string][]byte{"x": k1})},
			store(nil, nil, []string{"kms"}), "kms", "SecretMalformed", "no PEM certificate", "spec.certificates.trustedCAs[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := assemble(context.Background(), tt.os, secretsOf(t, tt.secrets...), nil)
			var p *problem
			require.ErrorAs(t, err, &p)
			assert.Equal(t, tt.wantSecret, p.secret)
			assert.Equal(t, tt.wantReason, reason.Of(err))
			assert.Contains(t, p.detail, tt.wantDetail)
			assert.Contains(t, err.Error(), tt.wantError, "the message names the field that names the Secret")
		})
	}
}

func TestAGeneratedSecretOverOneMiBIsNeverAttempted(t *testing.T) {
	cert, key := pair(t, "server")
	ca, _ := pair(t, "ca")
	var bundle []byte
	for len(bundle) < 1536<<10 { // 1.5 MiB of CA certificates
		bundle = append(bundle, ca...)
	}
	_, err := assemble(context.Background(), store([]string{"tls"}, nil, []string{"big-ca"}), secretsOf(t,
		secret("tls", map[string][]byte{"tls.crt": cert, "tls.key": key}),
		secret("big-ca", map[string][]byte{"ca.crt": bundle}),
	), nil)
	var p *problem
	require.ErrorAs(t, err, &p)
	assert.Equal(t, "TooLarge", reason.Of(err))
	assert.Equal(t, "s-generated", p.secret)
	assert.Contains(t, p.detail, "over the 1048576 a Secret may hold")
	assert.Contains(t, p.detail, "Biggest inputs: CAs.trusted.big-ca.crt (15", "names the biggest input first")
}

// countingGetter counts the Secrets a sync reads.
type countingGetter struct {
	secretGetter
	reads int
}

func (c *countingGetter) Get(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	c.reads++
	return c.secretGetter.Get(ctx, namespace, name)
}

// A tenant may reference a hundred Secrets of nearly 1 MiB each: a sync
// stops reading once what it read is over the limit, so one sync holds
// about 1 MiB and one Secret, not all of them.
func TestAssemblyStopsReadingAtTheSizeLimit(t *testing.T) {
	ca, _ := pair(t, "ca")
	var bundle []byte
	for len(bundle) < 300<<10 {
		bundle = append(bundle, ca...)
	}
	var secrets []*corev1.Secret
	var names []string
	for i := range 20 {
		name := fmt.Sprintf("ca-%02d", i)
		names = append(names, name)
		secrets = append(secrets, secret(name, map[string][]byte{"ca.crt": bundle}))
	}
	get := &countingGetter{secretGetter: secretsOf(t, secrets...)}
	_, err := assemble(context.Background(), store(nil, nil, names), get, nil)
	assert.Equal(t, "TooLarge", reason.Of(err))
	assert.Equal(t, 4, get.reads, "the fourth 300 KiB bundle passes 1 MiB; none after it is read")
	assert.Contains(t, err.Error(), "reading stopped before spec.certificates.trustedCAs[4]")
	assert.Contains(t, err.Error(), "over the 1048576 a Secret may hold")
}
