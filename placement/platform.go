// Package placement tells which platforms (os/arch) an ObjectStore's pods
// run on, from the Nodes they are bound to, else their StatefulSets' node
// selectors, else linux/amd64. The binary source picks the tenant's binary
// by it, and the updater never updates a tenant on mixed platforms in
// place (MinIO pushes one binary to every node).
package placement

import (
	"slices"
)

// The well-known labels the kubelet sets on its Node.
const (
	LabelOS   = "kubernetes.io/os"
	LabelArch = "kubernetes.io/arch"
)

// Default is the platform of a StatefulSet whose pods are on no labelled
// Node and whose node selector names neither label.
const Default = "linux/amd64"

const defaultOS, defaultArch = "linux", "amd64"

// Set is what one StatefulSet of a tenant says of where its pods run.
type Set struct {
	// NodeSelector is the pod template's.
	NodeSelector map[string]string
	// Nodes are the spec.nodeName of its pods ("" for an unscheduled one).
	Nodes []string
}

// Platforms returns the sorted distinct platforms ("os/arch") of a
// tenant's StatefulSets: for each, the platforms of the Nodes its pods are
// bound to (Nodes unknown to labels, or missing either label, count for
// nothing); for a StatefulSet none of whose pods is on such a Node, its
// node selector's, the default filling what it does not name. For a
// tenant without StatefulSets nothing is known: nil (callers take
// linux/amd64 when they can, and do not hold it against an image without
// it: there is no pod to run it).
func Platforms(sets []Set, labels func(node string) (map[string]string, bool)) []string {
	var out []string
	add := func(p string) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, s := range sets {
		found := false
		for _, name := range s.Nodes {
			if name == "" {
				continue
			}
			l, ok := labels(name)
			os, arch := l[LabelOS], l[LabelArch]
			if !ok || os == "" || arch == "" {
				continue
			}
			add(os + "/" + arch)
			found = true
		}
		if !found {
			os, arch := s.NodeSelector[LabelOS], s.NodeSelector[LabelArch]
			if os == "" {
				os = defaultOS
			}
			if arch == "" {
				arch = defaultArch
			}
			add(os + "/" + arch)
		}
	}
	slices.Sort(out)
	return out
}
