// Package netguard names the addresses the operator does not connect to
// on a tenant's say-so: a tenant-chosen host that resolves to one of them
// reaches the operator's own node or its cloud's metadata service.
package netguard

import "net/netip"

// RefusedKind says why a is not dialled for a tenant unless allowed; ""
// when it may be. It is the rule updates' endpoint policy applies to
// admin endpoints (updates.refusedKind), kept here so registries share it.
func RefusedKind(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast():
		return "link-local (where cloud metadata services answer)"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast():
		return "multicast"
	}
	for _, n := range []struct {
		net  netip.Prefix
		kind string
	}{
		{netip.MustParsePrefix("0.0.0.0/8"), "this-network (Linux dials it as the local host)"},
		{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata (AWS, over IPv6)"},
		{netip.MustParsePrefix("100.100.100.200/32"), "cloud metadata (Alibaba Cloud)"},
		{netip.MustParsePrefix("64:ff9b::a9fe:a9fe/128"), "cloud metadata (through NAT64)"},
	} {
		if n.net.Contains(a) {
			return n.kind
		}
	}
	return ""
}
