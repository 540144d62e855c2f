package updates

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// A fix to a tenant's configuration Secret (config.env) queues the
// ObjectStores that name it, and only those, within the informer's
// latency: not at the next resync ten minutes later.
func TestAChangeToAConfigurationSecretQueuesTheObjectStoresThatNameIt(t *testing.T) {
	other := tenantStore("t1", "other")
	require.NoError(t, unstructured.SetNestedField(other.Object, "other-env", "spec", "configuration", "name"))
	var secrets cache.SharedIndexInformer
	f := newFixtureWith(t, func(c *Config) {
		secrets = informers.NewSharedInformerFactory(c.Kube, 0).Core().V1().Secrets().Informer()
		c.SecretEvents = secrets
	}, fakeBinaries{}, tenantStore("t1", "a"), tenantStore("t1", "b"), other, tenantStore("t2", "a"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go secrets.Run(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), secrets.HasSynced))
	queue := f.c.loop.Queue()
	// The Secrets the fixture made were added as the informer started.
	drain := func() []string {
		var keys []string
		for queue.Len() > 0 {
			k, _ := queue.Get()
			queue.Done(k)
			queue.Forget(k)
			keys = append(keys, k)
		}
		return keys
	}
	require.Eventually(t, func() bool { return queue.Len() >= 3 }, 5*time.Second, time.Millisecond)
	drain()

	// The fake clientset keeps resourceVersions as given; an apiserver
	// bumps them.
	fixed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "env", Namespace: "t1", ResourceVersion: "2"},
		Data: map[string][]byte{v1.ConfigEnvKey: []byte("export MINIO_ROOT_USER=a\nexport MINIO_ROOT_PASSWORD=fixed\n")}}
	_, err := f.kube.CoreV1().Secrets("t1").Update(ctx, fixed, metav1.UpdateOptions{})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return queue.Len() >= 2 }, 5*time.Second, time.Millisecond)
	assert.ElementsMatch(t, []string{"t1/a", "t1/b"}, drain(), "the ObjectStores naming t1/env: not t1/other, not t2/a")

	require.NoError(t, f.kube.CoreV1().Secrets("t1").Delete(ctx, "env", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return queue.Len() >= 2 }, 5*time.Second, time.Millisecond)
	assert.ElementsMatch(t, []string{"t1/a", "t1/b"}, drain(), "a deletion too: the condition says it is missing")
}
