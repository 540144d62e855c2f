package main

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/object-store-operator/operator/health"
)

// lockedLog is a log a reflector's goroutine writes while the test reads.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// An install given a tenant label but no right to list namespaces starts
// nothing (no share may be counted for a tenant not known yet); it must
// say so where an SRE looks, not wait in silence.
func TestATenantLabelWithoutTheRightToReadNamespacesSaysWhy(t *testing.T) {
	scheme := runtime.NewScheme()
	meta := metadatafake.NewSimpleMetadataClient(scheme)
	meta.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", nil)
	})
	var log lockedLog
	checks := &health.Checks{}
	p := parts{
		cfg: config{tenantLabel: "platform.example/tenant"},
		k:   &kube{client: fake.NewClientset(), dynamic: dynamicfake.NewSimpleDynamicClient(scheme), metadata: meta},
		log: zerolog.New(&log), checks: checks,
	}
	inf, err := p.informers()
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	go inf.namespaces.Run(stop)

	require.Eventually(t, func() bool {
		return bytes.Contains([]byte(log.String()), []byte(`"reason":"NamespacesUnreadable"`))
	}, 10*time.Second, 10*time.Millisecond, "the refused list is logged with its reason")
	assert.Contains(t, log.String(), "grant list and watch on namespaces")
	err = checks.Ready()
	require.Error(t, err, "/readyz fails while the tenants are unknown")
	assert.Contains(t, err.Error(), "tenant-labels")
	assert.Contains(t, err.Error(), "platform.example/tenant label is not read yet")
}
