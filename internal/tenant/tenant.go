// Package tenant says whose a namespace's ObjectStores are, for every
// share and budget the operator keeps (restart, pull and update slots,
// store bytes, the Secret cache, workers, the failure budget). By default
// each namespace is a tenant, so one party with many namespaces holds many
// shares. The platform can name a namespace label whose value is the
// tenant (tenants cannot label their namespaces: that takes a
// cluster-scoped write), so a party's namespaces share one share; or it
// can make each ObjectStore a unit of its own, for a fleet one team runs
// in one namespace, where a release failing on every ObjectStore should
// halt as it would across namespaces.
package tenant

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Units are what a share is counted per.
type Units int

const (
	// PerTenant counts per tenant: the namespace's label value, else the
	// namespace.
	PerTenant Units = iota
	// PerObjectStore counts each ObjectStore apart (its namespace/name).
	PerObjectStore
)

// ParseUnits reads "tenant" or "objectstore".
func ParseUnits(s string) (Units, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "tenant":
		return PerTenant, nil
	case "objectstore":
		return PerObjectStore, nil
	}
	return 0, fmt.Errorf("is %q: it is tenant or objectstore", s)
}

// Resolver names tenants and units. Its zero value, and a nil one, count
// per namespace.
type Resolver struct {
	label      string
	units      Units
	namespaces cache.Indexer // namespace metadata, by name
}

// New resolves the tenant of a namespace from the value of label on it,
// read from namespaces (an informer's indexer of Namespaces or their
// metadata); with an empty label, or a namespace without it, the tenant
// is the namespace.
func New(label string, units Units, namespaces cache.Indexer) *Resolver {
	return &Resolver{label: label, units: units, namespaces: namespaces}
}

// Of names the tenant of namespace. A labelled tenant's name cannot be
// a namespace's ("tenant:" is no DNS label), so the two never share.
func (r *Resolver) Of(namespace string) string {
	if r == nil || r.label == "" || r.namespaces == nil {
		return namespace
	}
	obj, exists, err := r.namespaces.GetByKey(namespace)
	if err != nil || !exists {
		return namespace
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return namespace
	}
	if v := m.GetLabels()[r.label]; v != "" {
		return "tenant:" + v
	}
	return namespace
}

// Unit names the unit of the ObjectStore key (namespace/name): the key
// itself per ObjectStore, else its namespace's tenant.
func (r *Resolver) Unit(key string) string {
	if r != nil && r.units == PerObjectStore {
		return key
	}
	ns, _, _ := strings.Cut(key, "/")
	return r.Of(ns)
}

// Label is the namespace label naming tenants ("" when none).
func (r *Resolver) Label() string {
	if r == nil {
		return ""
	}
	return r.label
}
