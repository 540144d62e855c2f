// Package fakeapi is the controllers' unit-test fixture over fake
// clients that know ObjectStores. It is apart from internal/testutil,
// which knows no domain type.
package fakeapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
)

// API is the controllers' unit-test fixture, kubernetes/sample-controller's
// shape: fake clients preloaded with the objects, the informers' indexers
// filled by hand (never started), one sync called directly, and the API
// actions it took checked.
type API struct {
	Kube    *fake.Clientset
	Dynamic *dynamicfake.FakeDynamicClient
}

// New preloads the typed client with objs and the dynamic client
// with the ObjectStores; status applies merge conditions as the apiserver
// does (ApplyStatusConditions).
func New(stores []*unstructured.Unstructured, objs ...runtime.Object) *API {
	var dynObjs []runtime.Object
	for _, s := range stores {
		dynObjs = append(dynObjs, s)
	}
	a := &API{Kube: testutil.Clientset(objs...)}
	a.Dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1.Resource: v1.Kind + "List"}, dynObjs...)
	a.Dynamic.PrependReactor("patch", "objectstores", testutil.ApplyStatusConditions(a.Dynamic, v1.Resource))
	return a
}

// Actions lists the API calls made since the last call, as
// "verb resource[/subresource]", typed client first.
func (a *API) Actions() []string {
	var out []string
	for _, list := range [][]k8stesting.Action{a.Kube.Actions(), a.Dynamic.Actions()} {
		for _, act := range list {
			verb := act.GetVerb() + " " + act.GetResource().Resource
			if s := act.GetSubresource(); s != "" {
				verb += "/" + s
			}
			out = append(out, verb)
		}
	}
	a.ClearActions()
	return out
}

// ClearActions forgets the calls made so far.
func (a *API) ClearActions() {
	a.Kube.ClearActions()
	a.Dynamic.ClearActions()
}

// ObjectStore is the stored ObjectStore ns/name, decoded.
func (a *API) ObjectStore(t testing.TB, ns, name string) *v1.ObjectStore {
	t.Helper()
	u, err := a.Dynamic.Resource(v1.Resource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	store, err := v1.FromUnstructured(u)
	require.NoError(t, err)
	return store
}

// Condition is the one condition the stored ObjectStore ns/name carries
// (each controller's tests see only their own).
func (a *API) Condition(t testing.TB, ns, name string) metav1.Condition {
	t.Helper()
	store := a.ObjectStore(t, ns, name)
	require.Len(t, store.Status.Conditions, 1)
	return store.Status.Conditions[0]
}

// UnstructuredObjectStore is an ObjectStore ns/name with spec, as the
// dynamic client and the informers hold it.
func UnstructuredObjectStore(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": v1.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
}
