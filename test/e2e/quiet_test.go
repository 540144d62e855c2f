package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	apiv1 "github.com/object-store-operator/operator/api/v1"
)

// writeWatch records every change the apiserver reports to a namespace's
// ObjectStores, generated Secrets and StatefulSet specs, from the
// resourceVersion of a list taken when it starts: what a restart or a
// resync wrote, whoever wrote it. (StatefulSet status, which the
// statefulset controller keeps writing, is not a change to the tenant.)
type writeWatch struct {
	mu     sync.Mutex
	events []string
}

// watchWrites starts the watch on ns; stores adds its ObjectStores (status
// included) to what counts as a write.
func watchWrites(t *testing.T, ns string, stores bool) *writeWatch {
	t.Helper()
	cs := adminClient(t)
	ww := &writeWatch{}
	// Watched from the resource version of a list: a watch without one
	// would first replay what exists.
	secretList, err := cs.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: apiv1.ObjectStoreLabel})
	require.NoError(t, err)
	secrets, err := cs.CoreV1().Secrets(ns).Watch(t.Context(), metav1.ListOptions{LabelSelector: apiv1.ObjectStoreLabel, ResourceVersion: secretList.ResourceVersion})
	require.NoError(t, err)
	setList, err := cs.AppsV1().StatefulSets(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	sets, err := cs.AppsV1().StatefulSets(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: setList.ResourceVersion})
	require.NoError(t, err)
	t.Cleanup(secrets.Stop)
	t.Cleanup(sets.Stop)
	generations := map[string]int64{}
	for _, s := range setList.Items {
		generations[s.Name] = s.Generation
	}
	record := func(w watch.Interface, kind string) {
		for ev := range w.ResultChan() {
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				continue
			}
			ww.mu.Lock()
			if kind == "StatefulSet" && ev.Type == watch.Modified && generations[m.GetName()] == m.GetGeneration() {
				ww.mu.Unlock()
				continue
			}
			generations[m.GetName()] = m.GetGeneration()
			ww.events = append(ww.events, fmt.Sprintf("%s %s %s", ev.Type, kind, m.GetName()))
			ww.mu.Unlock()
		}
	}
	go record(secrets, "Secret")
	go record(sets, "StatefulSet")
	if stores {
		storeList, err := dyn(t).Resource(apiv1.Resource).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		w, err := dyn(t).Resource(apiv1.Resource).Namespace(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: storeList.GetResourceVersion()})
		require.NoError(t, err)
		t.Cleanup(w.Stop)
		go record(w, "ObjectStore")
	}
	return ww
}

func (ww *writeWatch) recorded() []string {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	return append([]string(nil), ww.events...)
}

// quiet asserts that nothing is written from the watch's resourceVersion
// until window has passed: that bounded window is what "nothing happened"
// means. It returns at the first write (failing the test) or at the
// window's end.
func (ww *writeWatch) quiet(t *testing.T, window time.Duration, what string) {
	t.Helper()
	if !assert.Never(t, func() bool { return len(ww.recorded()) > 0 }, window, 10*time.Millisecond, what) {
		t.Errorf("written: %v", ww.recorded())
	}
}

// counter reads one series (name and labels, as /metrics prints them) from
// the operator's metrics; a series not yet created, or metrics not served
// yet, count 0. Safe inside require.Eventually's condition.
func counter(t testing.TB, op *operator, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + op.metricsAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(body), "\n") {
		// Label values may hold spaces: the value is after the last one.
		if i := strings.LastIndexByte(l, ' '); i > 0 && l[:i] == series {
			v, err := strconv.ParseFloat(l[i+1:], 64)
			if err != nil {
				t.Errorf("%s: %v", l, err)
			}
			return v
		}
	}
	return 0
}

// waitSynced waits until this operator leads and each named controller's
// queue has drained (client-go's workqueue metrics): every key queued so
// far, the term's pass over every ObjectStore included, has been synced,
// and the writes those syncs make are done.
func waitSynced(t testing.TB, op *operator, controllers ...string) {
	t.Helper()
	for _, c := range controllers {
		require.Eventually(t, func() bool {
			adds := counter(t, op, `workqueue_adds_total{name="`+c+`"}`)
			return counter(t, op, "objectstore_operator_leader") == 1 && adds >= 1 &&
				counter(t, op, `workqueue_depth{name="`+c+`"}`) == 0 &&
				counter(t, op, `workqueue_work_duration_seconds_count{name="`+c+`"}`) >= adds
		}, 20*time.Second, 20*time.Millisecond, "%s synced", c)
	}
}
