// Package v1 holds the aistor.min.io/v1 ObjectStore API as far as this
// operator reads it. ObjectStores are read through the dynamic client and
// converted with FromUnstructured, so no generated clientset is needed;
// unknown spec fields are preserved by the CRD and ignored here.
package v1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, version and resource of ObjectStores.
var (
	GroupVersion = schema.GroupVersion{Group: "aistor.min.io", Version: "v1"}
	Resource     = GroupVersion.WithResource("objectstores")
)

// Kind is the ObjectStore kind.
const Kind = "ObjectStore"

// ObjectStoreLabel on a StatefulSet names the ObjectStore whose pods it
// runs; the mount-secret controller rolls those pods.
const ObjectStoreLabel = "aistor.min.io/objectstore"

// ConditionCertificatesReady tells whether the generated mount Secret
// holds every referenced certificate.
const ConditionCertificatesReady = "CertificatesReady"

// ObjectStore is a MinIO object store (tenant).
type ObjectStore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ObjectStoreSpec   `json:"spec,omitempty"`
	Status            ObjectStoreStatus `json:"status,omitempty"`
}

// ObjectStoreSpec is the part of the spec this operator acts on.
type ObjectStoreSpec struct {
	// Image is the MinIO image the pods run; its binary is served to them.
	Image string `json:"image,omitempty"`
	// ImagePullSecrets authenticate pulls of Image, as in a PodSpec.
	ImagePullSecrets []SecretRef  `json:"imagePullSecrets,omitempty"`
	Certificates     Certificates `json:"certificates,omitempty"`
}

// Certificates lists Secrets in the ObjectStore's namespace.
type Certificates struct {
	// Server key pairs; the first is MinIO's default certificate.
	Server []SecretRef `json:"server,omitempty"`
	// Client key pairs MinIO presents to other services.
	Client []SecretRef `json:"client,omitempty"`
	// TrustedCAs are CA certificates MinIO trusts.
	TrustedCAs []SecretRef `json:"trustedCAs,omitempty"`
}

// SecretRef names a Secret in the same namespace.
type SecretRef struct {
	Name string `json:"name"`
}

// ObjectStoreStatus is what the operator reports.
type ObjectStoreStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FromUnstructured converts what the dynamic client returns.
func FromUnstructured(u *unstructured.Unstructured) (*ObjectStore, error) {
	var os ObjectStore
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &os); err != nil {
		return nil, fmt.Errorf("ObjectStore %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &os, nil
}

// ReferencedSecrets returns every Secret name the spec references, once each.
func (o *ObjectStore) ReferencedSecrets() []string {
	seen := map[string]bool{}
	var out []string
	for _, list := range [][]SecretRef{o.Spec.Certificates.Server, o.Spec.Certificates.Client, o.Spec.Certificates.TrustedCAs} {
		for _, r := range list {
			if !seen[r.Name] {
				seen[r.Name] = true
				out = append(out, r.Name)
			}
		}
	}
	return out
}

// GeneratedSecretName is the mount Secret of the ObjectStore called name.
func GeneratedSecretName(name string) string { return name + "-generated" }

// SecretIndex returns an informer index function that files an ObjectStore
// under "<namespace>/<secret>" for every Secret name secrets returns, so a
// Secret change finds the stores that use it without a scan. An object that
// does not convert is filed nowhere; the controllers report it when they
// sync it.
func SecretIndex(secrets func(*ObjectStore) []string) func(obj any) ([]string, error) {
	return func(obj any) ([]string, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, nil
		}
		store, err := FromUnstructured(u)
		if err != nil {
			return nil, nil
		}
		names := secrets(store)
		keys := make([]string, 0, len(names))
		for _, name := range names {
			keys = append(keys, store.Namespace+"/"+name)
		}
		return keys, nil
	}
}

// PullSecrets returns the names of the image pull Secrets.
func (o *ObjectStore) PullSecrets() []string {
	out := make([]string, 0, len(o.Spec.ImagePullSecrets))
	for _, s := range o.Spec.ImagePullSecrets {
		out = append(out, s.Name)
	}
	return out
}
