package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/test/cluster"
	"github.com/object-store-operator/operator/upgradeserver"
)

// auditedOperatorEnv is the environment of an operator that runs as
// ServiceAccount "operator" of cluster.AuditedNamespace (bound to
// cluster-admin: the chart's RBAC is the Helm tests' business), so the
// apiserver's audit log holds its requests and nobody else's.
func auditedOperatorEnv(t testing.TB, extra ...string) []string {
	t.Helper()
	cs := adminClient(t)
	ns := cluster.AuditedNamespace
	// The previous audited test's namespace may still be terminating (its
	// operator's objects go first; longer on a loaded machine).
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute, 100*time.Millisecond, "namespace %s of an earlier audited test gone", ns)
	_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err, "one test at a time runs an audited operator")
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "operator"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "operator", Namespace: ns}},
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		// Not t.Context(): it is cancelled before cleanups run, and the
		// namespace and the binding stayed for the next audited test.
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		// The next audited test waits for it to be gone.
	})
	kubeconfig, _, err := testCluster.ServiceAccountKubeconfig(t.Context(), ns, "operator")
	require.NoError(t, err)
	return append(append(k8sEnv(ns), "KUBECONFIG="+kubeconfig), extra...)
}

// auditEvent is what the tests read of an audit log line.
type auditEvent struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	Verb      string `json:"verb"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
	} `json:"objectRef"`
	Received time.Time `json:"requestReceivedTimestamp"`
	// A long-running request (a watch) is logged when its response
	// starts and again when it completes, under one audit ID.
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
}

// auditedRequests returns the audited operator's requests the apiserver
// received in [from, to).
func auditedRequests(t testing.TB, from, to time.Time) []auditEvent {
	t.Helper()
	f, err := os.Open(testCluster.AuditLog)
	require.NoError(t, err)
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.User.Username == "system:serviceaccount:"+cluster.AuditedNamespace+":operator" && !ev.Received.Before(from) && ev.Received.Before(to) {
			out = append(out, ev)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// TestControlPlaneOutageWithCompaction: etcd and the apiserver stop for
// 10 s and come back with etcd's history compacted, so no watch can
// resume and every informer must list again. Pods keep being served
// throughout, the controllers resume (a rotated certificate reaches the
// generated Secret), no second CSR is filed, and the operator's request
// rate while it recovers stays bounded (counted in the audit log).
func TestControlPlaneOutageWithCompaction(t *testing.T) {
	ensureCRD(t)
	// Earlier tests' namespaces go first: a namespace whose deletion meets
	// the outage is retried by the namespace controller with a backoff of
	// minutes, and its ObjectStores hold up the next test that quiesces.
	quiesce(t, "")
	env := auditedOperatorEnv(t)
	opNS := cluster.AuditedNamespace
	start := time.Now()
	ns := operatorNamespace(t)
	keyPairSecret(t, ns, "tenant-a-tls", true)
	statefulSet(t, ns, "tenant-a")
	op := startOperator(t, env)
	applyYAML(t, objectStoreYAML(ns, "tenant-a", []string{"tenant-a-tls"}, nil, nil))
	require.Eventually(t, func() bool {
		gen, err := generated(t, ns, "tenant-a")
		return err == nil && len(gen.Data["CAs.operator.crt"]) > 0 && restartValue(t, ns, "tenant-a") != ""
	}, 15*time.Second, 20*time.Millisecond)

	c := op.client(t, testCluster.KubeletServingCA, 1)
	url := "https://" + serviceName + "." + opNS + ".svc.cluster.local" + upgradeserver.UpdatePath
	var served, failed int
	down := time.Now()
	require.NoError(t, testCluster.Outage(t.Context(), func() {
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			resp, err := c.Get(url)
			if err != nil {
				failed++
				t.Logf("during the outage: %v", err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				served++
			} else {
				failed++
			}
		}
	}))
	back := time.Now()
	assert.Zero(t, failed, "pods are served while the control plane is down (%d served)", served)
	assert.NotZero(t, served)

	// The controllers resume on relisted informers.
	keyPairSecret(t, ns, "tenant-a-tls", true)
	rotated, err := adminClient(t).CoreV1().Secrets(ns).Get(t.Context(), "tenant-a-tls", metav1.GetOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		gen, err := generated(t, ns, "tenant-a")
		return err == nil && string(gen.Data["public.crt"]) == string(rotated.Data["tls.crt"])
		// client-go's reflectors back off while the apiserver is away
		// (800 ms doubling to 30 s, with up to as much again in jitter)
		// and list again only when their backoff ends.
	}, 90*time.Second, 50*time.Millisecond, "a certificate rotated after the outage reaches the generated Secret")
	recovered := time.Since(back)

	// The request rate is a figure over a window: from the apiserver's
	// return until a few seconds after the operator caught up (15 s at
	// least). Wait it out.
	window := max(15*time.Second, recovered+5*time.Second)
	time.Sleep(time.Until(back.Add(window)))
	after := auditedRequests(t, back, back.Add(window))
	requests, lists := len(after), 0
	// The apiserver serves before its /readyz says so, which is when
	// Outage returns: a reflector whose backoff ended in between listed
	// before back (on a busy machine, seconds before). Lists are counted
	// from the outage on; the apiserver audits nothing while it is down.
	for _, ev := range auditedRequests(t, down, back.Add(window)) {
		if ev.Verb == "list" {
			lists++
		}
	}
	assert.NotZero(t, lists, "the informers listed again: the compaction left no watch to resume")
	rate := float64(requests) / window.Seconds()
	t.Logf("outage: %d requests served while down; recovered in %s; %d operator requests (%d lists) in the %s after the apiserver returned: %.1f/s",
		served, recovered.Round(time.Millisecond), requests, lists, window.Round(time.Second), rate)
	// A watch that re-watched at once would spend the client's 300 QPS.
	assert.Less(t, rate, 10.0, "the operator's request rate while it recovers stays bounded")
	assert.Positive(t, requests, "the audit log saw the operator")
	var filed int
	for _, ev := range auditedRequests(t, start, time.Now()) {
		if ev.Verb == "create" && ev.ObjectRef.Resource == "certificatesigningrequests" {
			filed++
		}
	}
	assert.Equal(t, 1, filed, "no second CSR")
	assert.True(t, op.alive())
}
