package main

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
)

// Replicas starting together end with one shared key.
func TestReplicasShareOneURLKey(t *testing.T) {
	client := fake.NewClientset()
	keys := make([][]byte, 4)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := loadURLKey(t.Context(), client, "ops")
			assert.NoError(t, err)
			keys[i] = k
		}()
	}
	wg.Wait()
	require.Len(t, keys[0], urlKeyBytes)
	for _, k := range keys[1:] {
		assert.Equal(t, keys[0], k)
	}
	again, err := loadURLKey(t.Context(), client, "ops")
	require.NoError(t, err)
	assert.Equal(t, keys[0], again, "a restart reads the same key")
}
