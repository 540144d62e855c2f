package autocert

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/internal/pemutil"
	"github.com/object-store-operator/operator/internal/testutil"
)

// A custom Secret without tls.key at start: the log says what is missing
// and that nothing is served; /readyz (Ready) gives the same cause.
func TestARejectionBeforeAnyCertificateSaysNothingIsServedAndWhy(t *testing.T) {
	now := time.Now()
	p := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
	logs := &testutil.LockedBuffer{}
	cur := NewCurrent(zerolog.New(logs), Validator{DNSName: svcName}, nil, nil)
	src, store := secretSourceFixture(t, KindCustom, logs, cur)
	require.NoError(t, store.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: "ops"},
		Data: map[string][]byte{pemutil.KeyTLSCert: p.cert}}))

	require.NoError(t, src.sync(context.Background(), tlsSecret))

	line := logs.String()
	assert.Contains(t, line, "TLS custom certificate rejected: Secret ops/object-store-operator-tls: missing: private key is missing: the Secret has tls.crt but no tls.key")
	assert.Contains(t, line, "nothing is served yet")
	assert.NotContains(t, line, "keeping the certificate already served", "there is none")
	err := cur.Ready()
	require.Error(t, err)
	assert.Equal(t, "no serving certificate loaded yet: Secret ops/object-store-operator-tls: "+
		"missing: private key is missing: the Secret has tls.crt but no tls.key", err.Error())

	// Fixed: served, ready, and the cause is gone.
	require.NoError(t, store.Update(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: "ops"},
		Data: map[string][]byte{pemutil.KeyTLSCert: p.cert, pemutil.KeyTLSKey: p.key}}))
	require.NoError(t, src.sync(context.Background(), tlsSecret))
	assert.NoError(t, cur.Ready())

	// Broken again: the served certificate stays, and the log says so.
	require.NoError(t, store.Update(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: "ops"},
		Data: map[string][]byte{pemutil.KeyTLSCert: p.cert}}))
	require.NoError(t, src.sync(context.Background(), tlsSecret))
	assert.Contains(t, logs.String(), "keeping the certificate already served")
	assert.NoError(t, cur.Ready())
}
