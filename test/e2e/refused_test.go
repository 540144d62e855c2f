package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/updates"
)

// TestOurOwnRefusalIsRetriedNotRolled: the operator's upgrade server
// refuses the real MinIO's download of the new release (the tenant's pods
// already hold their one download, OPERATOR_MAX_DOWNLOADS_PER_CLIENT=1).
// MinIO says it could not fetch the release; the operator says
// DownloadRefused, rolls nothing and counts nothing against the release,
// and once the download is free it asks again and MinIO updates in place.
func TestOurOwnRefusalIsRetriedNotRolled(t *testing.T) {
	t.Parallel()
	e := newUpdateEnv(t, updateOpts{operatorEnv: []string{"OPERATOR_MAX_DOWNLOADS_PER_CLIENT=1", "OPERATOR_UPDATE_FAILURE_BUDGET=1"}})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)
	// This test counts the update's outcomes (in place, nothing rolled,
	// nothing counted): a MinIO just started damages its own push (see
	// warm), as two runs without this showed ("Updated file has wrong
	// checksum" on one node, three calls in a row, then a roll).
	e.minio.warm(t)
	kubectl(t, "annotate", "objectstore", e.store, "-n", e.tenantNS, apiv1.UpdatesPausedAnnotation+"=true")
	e.setImage(t, e.newImage)
	e.waitVersion(t, metav1.ConditionFalse, "UpdatesPaused", 60*time.Second)
	var own *apiv1.BinaryStatus
	require.Eventually(t, func() bool {
		own = binaryStatus(t, e.tenantNS, e.store)
		return own != nil && own.Release == e.newer && own.URL != ""
	}, 60*time.Second, 100*time.Millisecond)

	// A pod of the tenant (the address its pods have) starts the binary's
	// download and reads nothing: the tenant's one download is taken.
	u, err := url.Parse(strings.TrimSuffix(own.URL, binstore.SHA256SumSuffix))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(e.servingCert))
	holder, err := tls.DialWithDialer(&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}, "tcp", e.op.upgradeAddr,
		&tls.Config{RootCAs: pool, ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}})
	require.NoError(t, err)
	defer holder.Close()
	_, err = fmt.Fprintf(holder, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.EscapedPath(), u.Host)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(holder), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	kubectl(t, "annotate", "objectstore", e.store, "-n", e.tenantNS, apiv1.UpdatesPausedAnnotation+"-")
	c := e.waitVersion(t, metav1.ConditionFalse, updates.CauseDownloadRefused, 50*time.Second)
	assert.Contains(t, c.Message, "not the tenant's failure")
	assert.Contains(t, c.Message, "could not fetch", "MinIO's own words, read as the operator's refusal")
	assert.Equal(t, e.oldImage, e.statefulSetImage(t), "nothing is rolled")
	assert.True(t, e.minio.allRun(t, e.older))

	// The download is free again: the call is made again and succeeds.
	holder.Close()
	e.waitVersion(t, metav1.ConditionTrue, "UpdatedInPlace", 3*time.Minute)
	assert.True(t, e.minio.allRun(t, e.newer))
	assert.Equal(t, e.newImage, e.statefulSetImage(t))
	assert.GreaterOrEqual(t, updateCalls(e.op, e.newer), 2, "MinIO was asked again")
	// A budget of one failure would have halted the release on a count.
	metrics := string(get(t, http.DefaultClient, "http://"+e.op.metricsAddr+"/metrics"))
	assert.NotContains(t, metrics, fmt.Sprintf(`objectstore_operator_updates_halted{release=%q} 1`, e.newer))
	assert.Contains(t, metrics, `objectstore_operator_updates_total{outcome="in_place"} 1`)
	assert.Contains(t, metrics, `objectstore_operator_updates_total{outcome="rolling"} 0`)
	assert.NotContains(t, kubectl(t, "describe", "objectstore", e.store, "-n", e.tenantNS), "UpdatesHalted")
}
