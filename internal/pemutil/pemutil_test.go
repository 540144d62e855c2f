package pemutil

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/object-store-operator/operator/internal/testutil"
)

func TestHalfAPairNamesTheMissingKey(t *testing.T) {
	now := time.Now()
	cert, key, _ := testutil.KeyPair(t, nil, []string{"object-store-operator.ops.svc"}, now.Add(-time.Hour), now.Add(time.Hour))
	for _, tt := range []struct {
		name string
		data map[string][]byte
		want string
	}{
		{"tls.crt without tls.key", map[string][]byte{KeyTLSCert: cert}, "private key is missing: the Secret has tls.crt but no tls.key"},
		{"tls.key without tls.crt", map[string][]byte{KeyTLSKey: key}, "certificate is missing: the Secret has tls.key but no tls.crt"},
		{"public.crt without private.key", map[string][]byte{KeyPublicCert: cert}, "the Secret has public.crt but no private.key"},
		{"an empty tls.key", map[string][]byte{KeyTLSCert: cert, KeyTLSKey: []byte(" \n")}, "the Secret has tls.crt but no tls.key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := KeyPairFromSecret(&corev1.Secret{Data: tt.data})
			require.ErrorIs(t, err, ErrMissing)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
