package placement

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPlatforms(t *testing.T) {
	nodes := map[string]map[string]string{
		"amd-1":   {LabelOS: "linux", LabelArch: "amd64"},
		"amd-2":   {LabelOS: "linux", LabelArch: "amd64"},
		"arm-1":   {LabelOS: "linux", LabelArch: "arm64"},
		"no-arch": {LabelOS: "linux"},
		"bare":    {},
	}
	arm := map[string]string{LabelArch: "arm64"}
	for _, tc := range []struct {
		name string
		sets []Set
		want []string
	}{
		{name: "no StatefulSets: nothing known", want: nil},
		{name: "pods on arm64 nodes", sets: []Set{{Nodes: []string{"arm-1", "arm-1"}}}, want: []string{"linux/arm64"}},
		{name: "pods on amd64 and arm64 nodes: both, sorted",
			sets: []Set{{Nodes: []string{"arm-1", "amd-1", "amd-2"}}}, want: []string{"linux/amd64", "linux/arm64"}},
		{name: "two pools on different platforms",
			sets: []Set{{Nodes: []string{"amd-1"}}, {Nodes: []string{"arm-1"}}}, want: []string{"linux/amd64", "linux/arm64"}},
		{name: "unscheduled pods count for nothing: the node selector",
			sets: []Set{{Nodes: []string{"", ""}, NodeSelector: arm}}, want: []string{"linux/arm64"}},
		{name: "some pods scheduled: their nodes, not the selector",
			sets: []Set{{Nodes: []string{"", "amd-1"}, NodeSelector: arm}}, want: []string{"linux/amd64"}},
		{name: "nodes missing a label or unknown count for nothing",
			sets: []Set{{Nodes: []string{"no-arch", "bare", "gone"}, NodeSelector: arm}}, want: []string{"linux/arm64"}},
		{name: "a selector naming only the OS: the default architecture",
			sets: []Set{{NodeSelector: map[string]string{LabelOS: "linux"}}}, want: []string{"linux/amd64"}},
		{name: "a selector on other labels: the default",
			sets: []Set{{NodeSelector: map[string]string{"zone": "a"}}}, want: []string{Default}},
		{name: "a pool on arm64 nodes and a pool with no selector nor node: both",
			sets: []Set{{Nodes: []string{"arm-1"}}, {}}, want: []string{"linux/amd64", "linux/arm64"}},
		{name: "nothing scheduled, no selector: the default", sets: []Set{{Nodes: []string{""}}}, want: []string{Default}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Platforms(tc.sets, func(name string) (map[string]string, bool) {
				l, ok := nodes[name]
				return l, ok
			})
			assert.Equal(t, tc.want, got)
		})
	}
}
