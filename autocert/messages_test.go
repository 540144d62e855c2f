package autocert

import (
	"context"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/internal/pemutil"
	"github.com/object-store-operator/operator/internal/testutil"
)

// A custom Secret without tls.key at start: nothing is served, and
// /readyz (Ready) says what is missing. (The log line the docs quote is
// checked end to end, test/e2e custom_test.go.)
func TestARejectionBeforeAnyCertificateSaysNothingIsServedAndWhy(t *testing.T) {
	now := time.Now()
	p := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
	metrics := NewMetrics(nil)
	cur := NewCurrent(zerolog.Nop(), Validator{DNSName: svcName}, metrics, nil)
	src, store := secretSourceFixture(t, KindCustom, &testutil.LockedBuffer{}, cur)
	require.NoError(t, store.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: "ops"},
		Data: map[string][]byte{pemutil.KeyTLSCert: p.cert}}))

	require.NoError(t, src.sync(context.Background(), tlsSecret))

	assert.Nil(t, cur.Leaf(), "nothing is served yet")
	assert.Equal(t, 1.0, promtest.ToFloat64(metrics.rejected.WithLabelValues("missing")))
	err := cur.Ready()
	require.Error(t, err)
	assert.Equal(t, "no serving certificate loaded yet: Secret ops/object-store-operator-tls: "+
		"missing: private key is missing: the Secret has tls.crt but no tls.key", err.Error())

	// Fixed: served, ready, and the cause is gone.
	require.NoError(t, store.Update(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: "ops"},
		Data: map[string][]byte{pemutil.KeyTLSCert: p.cert, pemutil.KeyTLSKey: p.key}}))
	require.NoError(t, src.sync(context.Background(), tlsSecret))
	assert.NoError(t, cur.Ready())
	assert.Empty(t, cur.rejections())
	served := cur.Leaf().SerialNumber

	// Broken again: the served certificate stays, and the cause is kept.
	require.NoError(t, store.Update(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: "ops"},
		Data: map[string][]byte{pemutil.KeyTLSCert: p.cert}}))
	require.NoError(t, src.sync(context.Background(), tlsSecret))
	assert.Equal(t, served, cur.Leaf().SerialNumber, "the certificate already served is kept")
	assert.Contains(t, cur.rejections(), "the Secret has tls.crt but no tls.key")
	assert.Equal(t, 2.0, promtest.ToFloat64(metrics.rejected.WithLabelValues("missing")))
	assert.NoError(t, cur.Ready())
}
