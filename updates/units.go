package updates

import (
	"fmt"
	"strings"
)

// Units. Every share, slot and budget of this package is counted per
// unit (Config.UnitOf, tenant.Resolver.Unit): by default the namespace,
// "tenant:<value>" for the namespaces the platform's tenant label puts in
// one tenant, or the ObjectStore key (namespace/name) when each
// ObjectStore is its own unit. One party with many namespaces otherwise
// held many shares and spent the failure budget alone; a fleet of one
// team in one namespace never halted a release failing on every
// ObjectStore (issue 29).
//
// Who may read whose words is another matter, and stays per namespace:
// a tenant's condition names only its own namespace's ObjectStores and
// quotes only their failures (describeFailuresFor, ownAndOthers). The
// namespaces of one labelled tenant are one party for its shares, but
// nothing says their users are the same people, and what one namespace's
// MinIO answers is not written into another's status.

// unitOf names the unit key counts against: by unit (nil: none), else
// key's namespace. An empty answer is the namespace too.
func unitOf(by func(string) string, key string) string {
	if by != nil {
		if u := by(key); u != "" {
			return u
		}
	}
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

// tenantPrefix starts the unit of a labelled tenant (tenant.Resolver.Of):
// no namespace's name, which is a DNS label.
const tenantPrefix = "tenant:"

// unitName words a unit for the tenant whose unit it is.
func unitName(unit string) string {
	switch {
	case strings.HasPrefix(unit, tenantPrefix):
		return "tenant " + strings.TrimPrefix(unit, tenantPrefix)
	case strings.Contains(unit, "/"):
		return "ObjectStore " + unit
	}
	return "namespace " + unit
}

// unitNoun is the plural that counts units like these: "namespaces"
// when each is a namespace (the default), "ObjectStores" when each is
// one, else "tenants" (labelled tenants, and namespaces that are their
// own tenant).
func unitNoun(units ...string) string {
	namespaces, stores := true, true
	for _, u := range units {
		isStore := strings.Contains(u, "/")
		isNamespace := !isStore && !strings.HasPrefix(u, tenantPrefix)
		namespaces = namespaces && isNamespace
		stores = stores && isStore
	}
	switch {
	case namespaces:
		return "namespaces"
	case stores:
		return "ObjectStores"
	}
	return "tenants"
}

// countUnits says "3 namespaces", "1 tenants"... in the plural the
// messages have always used.
func countUnits(n int, units ...string) string {
	return fmt.Sprintf("%d %s", n, unitNoun(units...))
}
