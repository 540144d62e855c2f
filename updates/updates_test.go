package updates

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/testutil"
	objstatus "github.com/object-store-operator/operator/status"
)

func TestParseConfigEnvReadsMinIOOperatorsFormat(t *testing.T) {
	for name, in := range map[string]string{
		"unquoted":      "export MINIO_ROOT_USER=admin\nexport MINIO_ROOT_PASSWORD=s3cr3t=x\n",
		"double quotes": "export MINIO_ROOT_USER=\"admin\"\nexport MINIO_ROOT_PASSWORD=\"s3cr3t=x\"\n",
		"single quotes": "# written by the operator\nexport MINIO_ROOT_USER='admin'\n\nexport MINIO_ROOT_PASSWORD='s3cr3t=x'\nexport MINIO_BROWSER=\"on\"\n",
		"no export":     "MINIO_ROOT_USER=admin\r\nMINIO_ROOT_PASSWORD=s3cr3t=x\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			user, pass, err := parseConfigEnv([]byte(in))
			require.NoError(t, err)
			assert.Equal(t, "admin", user)
			assert.Equal(t, "s3cr3t=x", pass, "a value may contain =")
		})
	}
	for name, in := range map[string]string{
		"empty":            "",
		"no password":      "export MINIO_ROOT_USER=admin\n",
		"commented out":    "# export MINIO_ROOT_USER=admin\n# export MINIO_ROOT_PASSWORD=x\n",
		"other variables":  "export MINIO_ACCESS_KEY=a\nexport MINIO_SECRET_KEY=b\n",
		"empty assignment": "export MINIO_ROOT_USER=\nexport MINIO_ROOT_PASSWORD=\"\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := parseConfigEnv([]byte(in))
			assert.Error(t, err)
		})
	}
}

func TestReleasesOrderByTheirTimeAndMapFromServerVersions(t *testing.T) {
	r, err := releaseOfVersion("2026-02-20T10:00:00Z")
	require.NoError(t, err)
	assert.Equal(t, "RELEASE.2026-02-20T10-00-00Z", r)
	_, err = releaseOfVersion("DEVELOPMENT.GOGET")
	assert.Error(t, err, "a build without a release stamp has no release")

	older, err := releaseTime("RELEASE.2026-01-10T10-00-00Z")
	require.NoError(t, err)
	hotfix, err := releaseTime("RELEASE.2026-01-10T10-00-00Z.hotfix.abc123")
	require.NoError(t, err)
	newer, err := releaseTime("RELEASE.2026-02-20T10-00-00Z")
	require.NoError(t, err)
	assert.True(t, older.Before(newer))
	assert.Equal(t, older, hotfix, "a hotfix orders with its release")
	_, err = releaseTime("latest")
	assert.Error(t, err)

	nodes := []node{
		{endpoint: "a", online: true, release: "RELEASE.2026-02-20T10-00-00Z"},
		{endpoint: "b", online: true, release: "RELEASE.2026-01-10T10-00-00Z"},
		{endpoint: "c", online: false},
	}
	assert.Equal(t, "RELEASE.2026-01-10T10-00-00Z", oldest(nodes), "status.release is the oldest while nodes differ")
	assert.False(t, allOn(nodes, "RELEASE.2026-02-20T10-00-00Z"))
	assert.False(t, allOn(nil, "RELEASE.2026-02-20T10-00-00Z"), "no nodes is not current")
	assert.True(t, allOn(nodes[:1], "RELEASE.2026-02-20T10-00-00Z"))
}

type staticCert struct{ cert *tls.Certificate }

func (s staticCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.cert, nil
}

func TestPreflightCallsOnlyWhenTheTenantTrustsTheUpgradeServer(t *testing.T) {
	ca := testutil.NewCA(t, "test CA")
	leaf := ca.Leaf(t, "object-store-operator.ops.svc.cluster.local", "10.0.0.7")
	trusting, distrusting := x509.NewCertPool(), x509.NewCertPool()
	trusting.AddCert(ca.Cert)
	distrusting.AddCert(testutil.NewCA(t, "other CA").Cert)
	c := &Controller{cfg: Config{Serving: staticCert{&leaf}}}
	now := time.Now()
	base := "https://object-store-operator.ops.svc.cluster.local:4221/webhook/v1/update/minio.RELEASE.2026-02-20T10-00-00Z.sha256sum"

	assert.NoError(t, c.preflight(trusting, base, now))
	assert.NoError(t, c.preflight(trusting, "https://10.0.0.7:4221/webhook/v1/update/x.sha256sum", now), "an IP SAN counts")

	err := c.preflight(distrusting, base, now)
	require.Error(t, err)
	assert.Equal(t, CauseOperatorNotTrusted, reason.Of(err))
	assert.Contains(t, err.Error(), "unknown authority", "the real cause")

	err = c.preflight(trusting, "https://operator.example.com:4221/webhook/v1/update/x.sha256sum", now)
	require.Error(t, err, "OPERATOR_UPDATE_URL's host must be in the certificate")
	assert.Contains(t, err.Error(), "operator.example.com")

	err = c.preflight(trusting, base, now.Add(2*time.Hour))
	require.Error(t, err, "an expired certificate fails MinIO too")
	assert.Contains(t, err.Error(), "expired")

	assert.NoError(t, (&Controller{}).preflight(distrusting, "http://operator:4221/webhook/v1/update/x.sha256sum", now),
		"plain HTTP has no certificate to trust")
	err = (&Controller{}).preflight(trusting, base, now)
	require.Error(t, err, "https URL while the server has no certificate")
	assert.Equal(t, CauseOperatorNotTrusted, reason.Of(err))
}

func statefulSet(name, store string, containers ...corev1.Container) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t", Labels: map[string]string{v1.ObjectStoreLabel: store}},
		Spec:       appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}},
	}
}

// setsLister is a StatefulSet lister over sets, as the informer's.
func setsLister(t *testing.T, sets ...runtime.Object) appslisters.StatefulSetLister {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range sets {
		require.NoError(t, indexer.Add(s))
	}
	return appslisters.NewStatefulSetLister(indexer)
}

func TestSetImageChangesOnlyTheMinIOContainerOfTheStoresStatefulSets(t *testing.T) {
	sets := []runtime.Object{
		statefulSet("a-pool-0", "a", corev1.Container{Name: "sidecar", Image: "sidecar:1"}, corev1.Container{Name: "minio", Image: "minio:old"}),
		statefulSet("a-pool-1", "a", corev1.Container{Name: "minio", Image: "minio:new"}),
		statefulSet("b-pool-0", "b", corev1.Container{Name: "minio", Image: "minio:old"}),
	}
	cs := testutil.Clientset(sets...)
	c := &Controller{cfg: Config{Kube: cs, StatefulSets: setsLister(t, sets...)}}
	store := &v1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "t"}, Spec: v1.ObjectStoreSpec{Image: "minio:new"}}

	assert.Equal(t, setsState{count: 2, onImage: false}, c.setsOf(store))
	changed, replaced, err := c.setImage(t.Context(), store)
	require.NoError(t, err)
	assert.Equal(t, []string{"a-pool-0"}, changed, "only the StatefulSet whose image differs is patched")
	assert.Equal(t, []string{"a-pool-0"}, replaced, "RollingUpdate (the default): its pods are replaced once more")
	var patches int
	for _, a := range cs.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	assert.Equal(t, 1, patches)

	// The strategic merge patch merged by name: the sidecar is untouched.
	s, err := cs.AppsV1().StatefulSets("t").Get(t.Context(), "a-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	images := map[string]string{}
	for _, ctr := range s.Spec.Template.Spec.Containers {
		images[ctr.Name] = ctr.Image
	}
	assert.Equal(t, map[string]string{"sidecar": "sidecar:1", "minio": "minio:new"}, images)
	other, err := cs.AppsV1().StatefulSets("t").Get(t.Context(), "b-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "minio:old", other.Spec.Template.Spec.Containers[0].Image, "another store's StatefulSet is untouched")
}

// One change, one restart: after an in-place update, a StatefulSet under
// OnDelete gets the image and nothing else, so no pod is replaced again;
// under RollingUpdate the pods must be replaced to run it, and the
// operator's rollout does it one at a time (the partition held), not the
// statefulset controller at once.
func TestAfterAnInPlaceUpdateOnlyRollingUpdateSetsReplaceTheirPodsAgain(t *testing.T) {
	onDelete := statefulSet("a-pool-0", "a", corev1.Container{Name: "minio", Image: "minio:old"})
	onDelete.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	rolling := statefulSet("a-pool-1", "a", corev1.Container{Name: "minio", Image: "minio:old"})
	sets := []runtime.Object{onDelete, rolling}
	cs := testutil.Clientset(sets...)
	c := &Controller{cfg: Config{Kube: cs, StatefulSets: setsLister(t, sets...)}}
	store := &v1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "t"}, Spec: v1.ObjectStoreSpec{Image: "minio:new"}}

	changed, replaced, err := c.setImage(t.Context(), store)
	require.NoError(t, err)
	assert.Equal(t, []string{"a-pool-0", "a-pool-1"}, changed)
	assert.Equal(t, []string{"a-pool-1"}, replaced)
	got, err := cs.AppsV1().StatefulSets("t").Get(t.Context(), "a-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, got.Annotations, v1.RolloutAnnotation, "OnDelete: its pods run the release already; none is replaced")
	got, err = cs.AppsV1().StatefulSets("t").Get(t.Context(), "a-pool-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, got.Annotations, v1.RolloutAnnotation)
	require.NotNil(t, got.Spec.UpdateStrategy.RollingUpdate)
	assert.Equal(t, int32(1), *got.Spec.UpdateStrategy.RollingUpdate.Partition, "held: the rollout replaces them one at a time")

	rolled, err := c.rollImage(t.Context(), &v1.ObjectStore{ObjectMeta: store.ObjectMeta, Spec: v1.ObjectStoreSpec{Image: "minio:newer"}})
	require.NoError(t, err)
	assert.Len(t, rolled, 2)
	got, err = cs.AppsV1().StatefulSets("t").Get(t.Context(), "a-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	held, _, together := v1.RolloutOf(got)
	assert.True(t, held, "a rolling fallback replaces OnDelete pods too, through the rollout")
	assert.True(t, together, "a new binary: MinIO runs no two side by side, the pods go together")
}

func TestRollingAStoreWithoutStatefulSetsOrMinIOContainerFails(t *testing.T) {
	set := statefulSet("c-pool-0", "c", corev1.Container{Name: "server", Image: "x"})
	c := &Controller{cfg: Config{Kube: testutil.Clientset(set), StatefulSets: setsLister(t, set)}}
	_, err := c.rollImage(t.Context(), &v1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "none", Namespace: "t"}, Spec: v1.ObjectStoreSpec{Image: "i"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no StatefulSet in namespace t is labelled aistor.min.io/objectstore=none")
	_, err = c.rollImage(t.Context(), &v1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "t"}, Spec: v1.ObjectStoreSpec{Image: "i"}})
	require.Error(t, err, "a patch would add a container named minio")
	assert.Contains(t, err.Error(), `no container named "minio"`)
}

func TestConditionKeepsItsTransitionTimeWhileItsStatusStays(t *testing.T) {
	then := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	s := status{cond: &metav1.Condition{Type: v1.ConditionVersionCurrent, Status: metav1.ConditionFalse, Reason: ReasonUpdatingInPlace, LastTransitionTime: then}}
	now := time.Now().Truncate(time.Second)
	s.setCondition(metav1.Condition{Type: v1.ConditionVersionCurrent, Status: metav1.ConditionFalse, Reason: ReasonRollingUpdate}, now)
	assert.Equal(t, then, s.cond.LastTransitionTime)
	s.setCondition(metav1.Condition{Type: v1.ConditionVersionCurrent, Status: metav1.ConditionTrue, Reason: ReasonCurrent}, now)
	assert.Equal(t, metav1.NewTime(now), s.cond.LastTransitionTime, "a new status is a transition, now")
	// That a second call is a change to record: status.TestWriteComparesEveryFieldItsManagerOwns.
}

func TestMinIOsWordsInTheConditionAreBounded(t *testing.T) {
	var s status
	s.setCondition(metav1.Condition{Type: v1.ConditionVersionCurrent, Status: metav1.ConditionFalse, Reason: ReasonRollingUpdate,
		Message: "node 10.0.0.7:9000 refused: " + strings.Repeat("x", 100000)}, time.Now())
	assert.LessOrEqual(t, len(s.cond.Message), objstatus.MaxMessage, "the CRD would refuse the whole status otherwise")
}

func TestFailedNodeHostIsReadBackFromItsMessage(t *testing.T) {
	assert.Equal(t, "127.0.0.1:9003", failedHost("node 127.0.0.1:9003: Updated file has wrong checksum. Expected: a, got: b"))
	assert.Equal(t, "pool-0-2.tenant-hl.ns.svc.cluster.local:9000",
		failedHost("node pool-0-2.tenant-hl.ns.svc.cluster.local:9000: invalid input: magic number mismatch"))
}

// apiSecrets reads Secrets straight from a (fake) apiserver, for tests.
type apiSecrets struct{ kube kubernetes.Interface }

func (a apiSecrets) Get(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return a.kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}
