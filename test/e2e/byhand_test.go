package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/test/cluster"
)

// TestUpdateByHandFromStatusBinaryURL: with the operator's updates paused,
// an administrator runs `mc admin update <alias> <status.binary.url>`
// (ServerUpdateV2 with that URL, as mc sends it) and the real MinIO
// updates in place to the tenant's own binary.
func TestUpdateByHandFromStatusBinaryURL(t *testing.T) {
	e := newUpdateEnv(t, updateOpts{})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)
	kubectl(t, "annotate", "objectstore", e.store, "-n", e.tenantNS, apiv1.UpdatesPausedAnnotation+"=true")
	e.setImage(t, e.newImage)
	e.waitVersion(t, metav1.ConditionFalse, "UpdatesPaused", 60*time.Second)
	newerPath, err := cluster.MinIOBinary(e.newer)
	require.NoError(t, err)
	bin, err := os.ReadFile(newerPath)
	require.NoError(t, err)
	own := waitBinaryStatus(t, e.tenantNS, e.store, bin)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := e.minio.admin(t).ServerUpdateV2(ctx, madmin.ServerUpdateOpts{UpdateURL: own.URL})
	require.NoError(t, err, "mc admin update <alias> %s", own.URL)
	for _, r := range res.Results {
		assert.Empty(t, r.Err, "node %s", r.Host)
	}
	require.Eventually(t, func() bool { return e.minio.allRun(t, e.newer) }, time.Minute, 200*time.Millisecond,
		"every node runs %s: %v", e.newer, e.minio.versions(t))
}
