package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// blocking holds every sync of namespace "hog" until released, and
// records the most of them that ran at once.
type blocking struct {
	mu      sync.Mutex
	running map[string]int
	most    map[string]int
	synced  map[string]int
	release chan struct{}
}

func (b *blocking) Reconcile(ctx context.Context, o *object, _ *unstructured.Unstructured) (Result, error) {
	b.mu.Lock()
	b.running[o.Namespace]++
	b.most[o.Namespace] = max(b.most[o.Namespace], b.running[o.Namespace])
	b.mu.Unlock()
	if o.Namespace == "hog" {
		select {
		case <-b.release:
		case <-ctx.Done():
		}
	}
	b.mu.Lock()
	b.running[o.Namespace]--
	b.synced[o.Namespace+"/"+o.Name]++
	b.mu.Unlock()
	return Result{}, nil
}

func (b *blocking) count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.synced[key]
}

func (b *blocking) mostAtOnce(ns string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.most[ns]
}

// One tenant's ObjectStores whose syncs hang take no more than their
// unit's share of the workers: another tenant's sync runs meanwhile, and
// every key of the hog is synced once released.
func TestOneUnitHoldsAtMostItsShareOfTheWorkers(t *testing.T) {
	b := &blocking{running: map[string]int{}, most: map[string]int{}, synced: map[string]int{}, release: make(chan struct{})}
	var stores []*unstructured.Unstructured
	for i := range 10 {
		stores = append(stores, objectStore("hog", fmt.Sprintf("s%d", i)))
	}
	stores = append(stores, objectStore("other", "one"))
	l := newLoop(t, Options[*object]{Workers: 4, PerUnit: 2}, b, stores...)
	run(t, l)
	require.Eventually(t, func() bool { return b.count("other/one") == 1 }, 5*time.Second, time.Millisecond,
		"another tenant is synced while the hog's syncs hang")
	assert.Equal(t, 2, b.mostAtOnce("hog"), "the hog holds two workers, not four")
	close(b.release)
	require.Eventually(t, func() bool {
		for i := range 10 {
			if b.count(fmt.Sprintf("hog/s%d", i)) != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "every parked key is synced")
	assert.Equal(t, 2, b.mostAtOnce("hog"))
}
