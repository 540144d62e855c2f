package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsinformers "k8s.io/client-go/informers/apps/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
)

// namespacedInformers is one SharedIndexInformer made of one informer per
// watched namespace: with OPERATOR_WATCH_NAMESPACES the operator may list
// and watch only those namespaces (its RBAC is a Role in each), and
// client-go's informers watch one namespace or all. The controllers take
// it as any informer: handlers are added to every namespace's informer,
// reads go to the namespace's own store (by key) or to all of them
// (ListKeys, indexes), and it has synced once every namespace has. The
// stores are the informers' own; writing to them is refused.
type namespacedInformers struct {
	byNamespace map[string]cache.SharedIndexInformer
	order       []string
}

// newNamespacedInformers returns the informer of the only namespace
// itself, or one over all of them.
func newNamespacedInformers(namespaces []string, make func(namespace string) cache.SharedIndexInformer) cache.SharedIndexInformer {
	if len(namespaces) == 1 {
		return make(namespaces[0])
	}
	m := &namespacedInformers{byNamespace: map[string]cache.SharedIndexInformer{}}
	for _, ns := range namespaces {
		if _, ok := m.byNamespace[ns]; ok {
			continue
		}
		m.byNamespace[ns] = make(ns)
		m.order = append(m.order, ns)
	}
	return m
}

func (m *namespacedInformers) each(fn func(cache.SharedIndexInformer) error) error {
	var errs []error
	for _, ns := range m.order {
		if err := fn(m.byNamespace[ns]); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

// registration is a handler's registrations on every namespace's informer.
type registration struct {
	parts map[string]cache.ResourceEventHandlerRegistration
	order []string
}

func (r *registration) HasSynced() bool {
	for _, p := range r.parts {
		if !p.HasSynced() {
			return false
		}
	}
	return true
}

func (r *registration) HasSyncedChecker() cache.DoneChecker {
	checkers := make([]cache.DoneChecker, 0, len(r.order))
	for _, ns := range r.order {
		checkers = append(checkers, r.parts[ns].HasSyncedChecker())
	}
	return allDone(checkers)
}

func (m *namespacedInformers) addHandler(add func(cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error)) (cache.ResourceEventHandlerRegistration, error) {
	reg := &registration{parts: map[string]cache.ResourceEventHandlerRegistration{}, order: m.order}
	for _, ns := range m.order {
		p, err := add(m.byNamespace[ns])
		if err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
		reg.parts[ns] = p
	}
	return reg, nil
}

func (m *namespacedInformers) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return m.addHandler(func(i cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return i.AddEventHandler(h)
	})
}

func (m *namespacedInformers) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return m.addHandler(func(i cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return i.AddEventHandlerWithResyncPeriod(h, resync)
	})
}

func (m *namespacedInformers) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return m.addHandler(func(i cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return i.AddEventHandlerWithOptions(h, o)
	})
}

func (m *namespacedInformers) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	reg, ok := handle.(*registration)
	if !ok {
		return fmt.Errorf("remove event handler: %T is not a registration of this informer", handle)
	}
	var errs []error
	for _, ns := range m.order {
		if err := m.byNamespace[ns].RemoveEventHandler(reg.parts[ns]); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

func (m *namespacedInformers) GetStore() cache.Store { return m.GetIndexer() }

func (m *namespacedInformers) GetIndexer() cache.Indexer { return namespacedIndexer{m} }

// GetController has no single controller to return; nothing here calls it.
func (m *namespacedInformers) GetController() cache.Controller { return nil }

func (m *namespacedInformers) Run(stopCh <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stopCh
		cancel()
	}()
	m.RunWithContext(ctx)
}

func (m *namespacedInformers) RunWithContext(ctx context.Context) {
	var wg sync.WaitGroup
	for _, ns := range m.order {
		wg.Go(func() { m.byNamespace[ns].RunWithContext(ctx) })
	}
	wg.Wait()
}

func (m *namespacedInformers) HasSynced() bool {
	for _, i := range m.byNamespace {
		if !i.HasSynced() {
			return false
		}
	}
	return true
}

func (m *namespacedInformers) HasSyncedChecker() cache.DoneChecker {
	checkers := make([]cache.DoneChecker, 0, len(m.order))
	for _, ns := range m.order {
		checkers = append(checkers, m.byNamespace[ns].HasSyncedChecker())
	}
	return allDone(checkers)
}

// LastSyncResourceVersion has no meaning across namespaces.
func (m *namespacedInformers) LastSyncResourceVersion() string { return "" }

func (m *namespacedInformers) SetWatchErrorHandler(h cache.WatchErrorHandler) error {
	return m.each(func(i cache.SharedIndexInformer) error { return i.SetWatchErrorHandler(h) })
}

func (m *namespacedInformers) SetWatchErrorHandlerWithContext(h cache.WatchErrorHandlerWithContext) error {
	return m.each(func(i cache.SharedIndexInformer) error { return i.SetWatchErrorHandlerWithContext(h) })
}

func (m *namespacedInformers) SetTransform(f cache.TransformFunc) error {
	return m.each(func(i cache.SharedIndexInformer) error { return i.SetTransform(f) })
}

func (m *namespacedInformers) IsStopped() bool {
	for _, i := range m.byNamespace {
		if !i.IsStopped() {
			return false
		}
	}
	return true
}

func (m *namespacedInformers) AddIndexers(indexers cache.Indexers) error {
	return m.each(func(i cache.SharedIndexInformer) error { return i.AddIndexers(indexers) })
}

// namespacedIndexer reads the namespaces' stores as one.
type namespacedIndexer struct{ m *namespacedInformers }

var errReadOnly = errors.New("the store of a multi-namespace informer is filled by its informers only")

func (x namespacedIndexer) Add(any) error                        { return errReadOnly }
func (x namespacedIndexer) Update(any) error                     { return errReadOnly }
func (x namespacedIndexer) Delete(any) error                     { return errReadOnly }
func (x namespacedIndexer) Replace([]any, string) error          { return errReadOnly }
func (x namespacedIndexer) Resync() error                        { return nil }
func (x namespacedIndexer) Bookmark(string)                      {}
func (x namespacedIndexer) LastStoreSyncResourceVersion() string { return "" }

func (x namespacedIndexer) List() []any {
	var out []any
	for _, ns := range x.m.order {
		out = append(out, x.m.byNamespace[ns].GetIndexer().List()...)
	}
	return out
}

func (x namespacedIndexer) ListKeys() []string {
	var out []string
	for _, ns := range x.m.order {
		out = append(out, x.m.byNamespace[ns].GetIndexer().ListKeys()...)
	}
	return out
}

// store is the namespace's store for a namespace/name key, or nil.
func (x namespacedIndexer) store(key string) cache.Indexer {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return nil
	}
	i, ok := x.m.byNamespace[ns]
	if !ok {
		return nil
	}
	return i.GetIndexer()
}

func (x namespacedIndexer) Get(obj any) (any, bool, error) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return x.GetByKey(key)
}

func (x namespacedIndexer) GetByKey(key string) (any, bool, error) {
	s := x.store(key)
	if s == nil {
		return nil, false, nil
	}
	return s.GetByKey(key)
}

func (x namespacedIndexer) Index(name string, obj any) ([]any, error) {
	var out []any
	for _, ns := range x.m.order {
		items, err := x.m.byNamespace[ns].GetIndexer().Index(name, obj)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

func (x namespacedIndexer) IndexKeys(name, value string) ([]string, error) {
	var out []string
	for _, ns := range x.m.order {
		keys, err := x.m.byNamespace[ns].GetIndexer().IndexKeys(name, value)
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
	}
	return out, nil
}

func (x namespacedIndexer) ListIndexFuncValues(name string) []string {
	seen := map[string]bool{}
	var out []string
	for _, ns := range x.m.order {
		for _, v := range x.m.byNamespace[ns].GetIndexer().ListIndexFuncValues(name) {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	return out
}

func (x namespacedIndexer) ByIndex(name, value string) ([]any, error) {
	var out []any
	for _, ns := range x.m.order {
		items, err := x.m.byNamespace[ns].GetIndexer().ByIndex(name, value)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

func (x namespacedIndexer) GetIndexers() cache.Indexers {
	if len(x.m.order) == 0 {
		return cache.Indexers{}
	}
	return x.m.byNamespace[x.m.order[0]].GetIndexer().GetIndexers()
}

func (x namespacedIndexer) AddIndexers(indexers cache.Indexers) error {
	return x.m.AddIndexers(indexers)
}

// allDoneChecker is done once every checker is.
type allDoneChecker struct {
	checkers []cache.DoneChecker
	once     sync.Once
	done     chan struct{}
}

func allDone(checkers []cache.DoneChecker) cache.DoneChecker {
	return &allDoneChecker{checkers: checkers, done: make(chan struct{})}
}

func (c *allDoneChecker) Name() string {
	names := make([]string, 0, len(c.checkers))
	for _, ch := range c.checkers {
		names = append(names, ch.Name())
	}
	return strings.Join(names, "+")
}

// Done waits for the checkers only once someone asks.
func (c *allDoneChecker) Done() <-chan struct{} {
	c.once.Do(func() {
		go func() {
			for _, ch := range c.checkers {
				<-ch.Done()
			}
			close(c.done)
		}()
	})
	return c.done
}

// statefulSetInformer is a StatefulSet informer over several namespaces,
// in the shape the mount-secret controller takes.
type statefulSetInformer struct{ informer cache.SharedIndexInformer }

var _ appsinformers.StatefulSetInformer = statefulSetInformer{}

func (s statefulSetInformer) Informer() cache.SharedIndexInformer { return s.informer }

func (s statefulSetInformer) Lister() appslisters.StatefulSetLister {
	return appslisters.NewStatefulSetLister(s.informer.GetIndexer())
}
