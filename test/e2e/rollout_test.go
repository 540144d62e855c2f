package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/rollout"
	"github.com/object-store-operator/operator/test/cluster"
)

// minioKubelet runs a tenant's MinIO nodes as the pods of its
// StatefulSets, as kubelets would: node i is the pod nodeOf names. A pod
// taken down (deleted, or replaced by the statefulset controller) stops
// its node; the pod created again starts it from the generated Secret as
// it is then and the release of the pod's image, and is reported Ready
// once MinIO answers /minio/health/ready. It counts what a user would
// watch: how many nodes were down at once, and which pods were taken
// down while MinIO would have said no.
type minioKubelet struct {
	t      testing.TB
	m      *minioCluster
	ns     string
	store  string
	nodeOf map[string]int // pod name -> node

	mu      sync.Mutex
	running map[int]types.UID // node -> the pod it runs for
	down    int
	maxDown int
	// outside: nodes stopped by the test, not by a pod going.
	outside map[int]bool
	// takenWhileOutside are pods taken down while a node was down outside.
	takenWhileOutside []string
	replaced          []string
	// notReady: nodes taken down with their pod and not Ready again;
	// downAt: the nodes down (those and the ones outside) each time a pod
	// was taken down.
	notReady map[int]bool
	downAt   [][]int
	errs     []error
}

func newMinIOKubelet(t testing.TB, m *minioCluster, ns, store string, nodeOf map[string]int) *minioKubelet {
	t.Helper()
	k := &minioKubelet{t: t, m: m, ns: ns, store: store, nodeOf: nodeOf, running: map[int]types.UID{}, outside: map[int]bool{}, notReady: map[int]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(adminClient(t), 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods().Informer()
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.sync,
		UpdateFunc: func(_, obj any) { k.sync(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				k.takeDown(p)
			}
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	return k
}

// sync starts the node of a pod that has none running for it.
func (k *minioKubelet) sync(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[cluster.OwnKubeletLabel] == "" {
		return
	}
	node, ours := k.nodeOf[p.Name]
	if !ours {
		return
	}
	if p.DeletionTimestamp != nil {
		k.takeDown(p)
		return
	}
	k.mu.Lock()
	was, running := k.running[node]
	k.mu.Unlock()
	if running && was == p.UID {
		return
	}
	if running {
		k.takeDown(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: was}})
	}
	if was == "" && !running && k.m.nodes[node] != nil && !k.stopped(node) {
		// The node started with the cluster, before its first pod.
		k.mu.Lock()
		k.running[node] = p.UID
		k.mu.Unlock()
		k.ready(p)
		return
	}
	k.start(p, node)
}

func (k *minioKubelet) stopped(node int) bool {
	select {
	case <-k.m.nodes[node].done:
		return true
	default:
		return false
	}
}

// takeDown stops the node of pod p, once.
func (k *minioKubelet) takeDown(p *corev1.Pod) {
	node, ours := k.nodeOf[p.Name]
	if !ours {
		return
	}
	k.mu.Lock()
	if uid, running := k.running[node]; !running || uid != p.UID {
		k.mu.Unlock()
		return
	}
	delete(k.running, node)
	k.down++
	k.maxDown = max(k.maxDown, k.down)
	k.replaced = append(k.replaced, p.Name)
	if len(k.outside) > 0 {
		k.takenWhileOutside = append(k.takenWhileOutside, p.Name)
	}
	k.notReady[node] = true
	var down []int
	for n := range k.m.nodes {
		if k.notReady[n] || k.outside[n] {
			down = append(down, n)
		}
	}
	k.downAt = append(k.downAt, down)
	k.mu.Unlock()
	k.m.stop(k.t, node, false)
}

// start runs node for pod p from the generated Secret and p's image, and
// reports p Ready once MinIO is.
func (k *minioKubelet) start(p *corev1.Pod, node int) {
	fail := func(err error) {
		k.mu.Lock()
		k.errs = append(k.errs, fmt.Errorf("pod %s: %w", p.Name, err))
		k.mu.Unlock()
	}
	gen, err := adminClient(k.t).CoreV1().Secrets(k.ns).Get(context.Background(), apiv1.GeneratedSecretName(k.store), metav1.GetOptions{})
	if err != nil {
		fail(err)
		return
	}
	image := p.Spec.Containers[0].Image
	release := image[strings.LastIndex(image, ":")+1:]
	if err := k.m.install(node, release, cluster.MinIOCertsDir(gen.Data)); err != nil {
		fail(err)
		return
	}
	if err := k.m.launch(node); err != nil {
		fail(err)
		return
	}
	k.mu.Lock()
	k.running[node] = p.UID
	k.mu.Unlock()
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // liveness only
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := insecure.Get("https://" + k.m.addr(node) + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				k.mu.Lock()
				k.down = max(k.down-1, 0)
				delete(k.notReady, node)
				k.mu.Unlock()
				k.ready(p)
				return
			}
		}
	}
	fail(fmt.Errorf("MinIO node %d not ready in 2m", node))
}

// ready reports pod p Running and Ready, as its kubelet would.
func (k *minioKubelet) ready(p *corev1.Pod) {
	p = p.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.HostIP = k.m.host, k.m.host
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	if _, err := adminClient(k.t).CoreV1().Pods(k.ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		k.mu.Lock()
		k.errs = append(k.errs, fmt.Errorf("pod %s ready: %w", p.Name, err))
		k.mu.Unlock()
	}
}

// stopOutside stops node as a failure outside its pod would (its pod
// stays Ready), and startOutside brings it back.
func (k *minioKubelet) stopOutside(node int) {
	k.mu.Lock()
	k.outside[node] = true
	k.mu.Unlock()
	k.m.stop(k.t, node, false)
}

func (k *minioKubelet) startOutside(node int) {
	require.NoError(k.t, k.m.launch(node))
	k.mu.Lock()
	delete(k.outside, node)
	k.mu.Unlock()
}

func (k *minioKubelet) figures() (maxDown int, replaced, whileOutside []string, errs []error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.maxDown, append([]string(nil), k.replaced...), append([]string(nil), k.takenWhileOutside...), append([]error(nil), k.errs...)
}

// minioStatefulSet is a StatefulSet of the tenant whose pods minioKubelet
// runs, under strategy.
func minioStatefulSet(t testing.TB, ns, store, name string, replicas int32, image string, strategy appsv1.StatefulSetUpdateStrategyType) {
	t.Helper()
	labels := map[string]string{"app": name, cluster.OwnKubeletLabel: "minio"}
	_, err := adminClient(t).AppsV1().StatefulSets(ns).Create(t.Context(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apiv1.ObjectStoreLabel: apiv1.ObjectStoreLabelValue(store)}},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: strategy},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "minio", Image: image}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// servedCertificate is the leaf a node serves at addr.
func servedCertificate(t testing.TB, addr string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the certificate
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// A certificate rotation on a real 4-node MinIO whose pods run under both
// strategies (a RollingUpdate StatefulSet and an OnDelete one of the same
// ObjectStore): the operator replaces one pod at a time, never while
// MinIO's maintenance check says no, and every node serves the new
// certificate at the end. Then an in-place update of the same tenant:
// no OnDelete pod is replaced afterwards, the RollingUpdate ones once
// each, as VersionCurrent says.
func TestACertificateRestartReplacesOnePodAtATimeWhenMinIOAgrees(t *testing.T) {
	t.Parallel()
	e := newUpdateEnv(t, updateOpts{deferMinIO: true})
	ca := e.useTenantCA(t)
	e.startMinIO(t)
	// The env's own StatefulSet has pods no MinIO runs in: this test's
	// StatefulSets take its place.
	require.NoError(t, adminClient(t).AppsV1().StatefulSets(e.tenantNS).Delete(t.Context(), poolName(e.store), metav1.DeleteOptions{}))
	k := newMinIOKubelet(t, e.minio, e.tenantNS, e.store, map[string]int{
		"rolling-0": 0, "rolling-1": 1, "ondelete-0": 2, "ondelete-1": 3,
	})
	minioStatefulSet(t, e.tenantNS, e.store, "rolling", 2, e.oldImage, appsv1.RollingUpdateStatefulSetStrategyType)
	minioStatefulSet(t, e.tenantNS, e.store, "ondelete", 2, e.oldImage, appsv1.OnDeleteStatefulSetStrategyType)
	require.Eventually(t, func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return len(k.running) == 4
	}, time.Minute, 50*time.Millisecond, "the four pods run the four nodes")
	// New StatefulSets do not mount the generated Secret's current content
	// yet (no restart annotation): the operator restarts them first. That
	// rollout ends before the test counts anything: a CI run stopped a
	// node in the middle of it, and another rotated the certificate then,
	// so that a pod just created was replaced again before it was Ready
	// (PodsCurrent, still True from the env's own StatefulSet, had not
	// waited for it).
	waitFirstRestart(t, e.tenantNS, "rolling", "ondelete")
	require.Eventually(t, func() bool {
		c := conditionOf(t, e.tenantNS, e.store, apiv1.ConditionPodsCurrent)
		return c.Status == metav1.ConditionTrue && k.allReady()
	}, 3*time.Minute, 100*time.Millisecond, "the first rollout of the new StatefulSets ends")
	k.mu.Lock()
	k.replaced, k.maxDown = nil, 0
	k.mu.Unlock()
	before := servedCertificate(t, e.minio.addr(3))

	// One node down outside any pod: MinIO says no other may go.
	k.stopOutside(1)
	// A new certificate from the tenant's CA, as cert-manager renews it.
	rotated := tenantTLS(t, ca)
	cert := rotated["tls.crt"]
	putNamedSecret(t, e.tenantNS, "tenant-tls", rotated)
	var c metav1.Condition
	require.Eventually(t, func() bool {
		c = conditionOf(t, e.tenantNS, e.store, apiv1.ConditionPodsCurrent)
		return c.Reason == rollout.ReasonWaitingForQuorum
	}, 2*time.Minute, 100*time.Millisecond, "the rollout waits for MinIO: %+v", c)
	t.Logf("while node 1 is down: %s", c.Message)
	_, replaced, _, _ := k.figures()
	assert.Empty(t, replaced, "no pod is taken down while MinIO says 412")

	k.startOutside(1)
	require.Eventually(t, func() bool {
		c = conditionOf(t, e.tenantNS, e.store, apiv1.ConditionPodsCurrent)
		return c.Status == metav1.ConditionTrue
	}, 5*time.Minute, 200*time.Millisecond, "every pod replaced: %+v", c)
	maxDown, replaced, whileOutside, errs := k.figures()
	require.Empty(t, errs)
	t.Logf("replaced in order: %v", replaced)
	assert.ElementsMatch(t, []string{"rolling-0", "rolling-1", "ondelete-0", "ondelete-1"}, replaced, "each pod once, under both strategies")
	assert.Equal(t, 1, maxDown, "never two nodes down at once")
	assert.Empty(t, whileOutside, "no pod taken down while MinIO said no")
	for i := range e.minioPorts {
		served := servedCertificate(t, e.minio.addr(i))
		assert.Equal(t, cert, pemOf(served), "node %d serves the new certificate", i)
	}
	assert.NotEqual(t, pemOf(before), cert)

	rolling, err := adminClient(t).AppsV1().StatefulSets(e.tenantNS).Get(t.Context(), "rolling", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, rolling.Annotations, apiv1.RolloutAnnotation, "the rollout is over")
	if ru := rolling.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		assert.Zero(t, *ru.Partition, "the tenant's partition (none) is given back")
	}

	// Then an in-place update: MinIO restarts its own servers and the pods
	// stay. Setting the image afterwards replaces no OnDelete pod; the
	// RollingUpdate pods must be replaced to run the new template, once
	// each, one at a time, and VersionCurrent says so, naming them.
	k.mu.Lock()
	k.replaced, k.maxDown = nil, 0
	k.mu.Unlock()
	e.minio.warm(t) // every node has just started: MinIO damages its own push until warm
	e.setImage(t, e.newImage)
	v := e.waitVersion(t, metav1.ConditionTrue, "UpdatedInPlace", 3*time.Minute)
	t.Logf("after the update: %s", v.Message)
	assert.Contains(t, v.Message, "StatefulSets rolling use the RollingUpdate strategy")
	assert.NotContains(t, v.Message, "ondelete")
	require.Eventually(t, func() bool {
		c = conditionOf(t, e.tenantNS, e.store, apiv1.ConditionPodsCurrent)
		_, replaced, _, _ := k.figures()
		s, err := adminClient(t).AppsV1().StatefulSets(e.tenantNS).Get(t.Context(), "rolling", metav1.GetOptions{})
		_, held := s.Annotations[apiv1.RolloutAnnotation]
		return err == nil && !held && c.Status == metav1.ConditionTrue && len(replaced) >= 2 && k.allReady()
	}, 5*time.Minute, 200*time.Millisecond, "the RollingUpdate pods replaced onto the image: %+v", c)
	maxDown, replaced, _, errs = k.figures()
	require.Empty(t, errs)
	assert.ElementsMatch(t, []string{"rolling-0", "rolling-1"}, replaced, "no OnDelete pod replaced, each RollingUpdate pod once")
	assert.Equal(t, 1, maxDown, "never two nodes down at once")
	// A node just replaced may not be listed online by its peers yet.
	assert.Eventually(t, func() bool { return e.minio.allRun(t, e.newer) }, time.Minute, 200*time.Millisecond,
		"every node on the release, the replaced ones from the image")
	onDelete, err := adminClient(t).AppsV1().StatefulSets(e.tenantNS).Get(t.Context(), "ondelete", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, e.newImage, onDelete.Spec.Template.Spec.Containers[0].Image, "a pod created later runs the release")
}

func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}
