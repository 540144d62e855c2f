package updates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// What `kubectl get objectstore -o wide` shows: how many nodes run which
// release, and each node's, as MinIO said.
func TestTheStatusSaysWhichReleaseEachNodeRuns(t *testing.T) {
	var s status
	s.seen([]node{
		{endpoint: "n0:9000", online: true, release: relNew},
		{endpoint: "n1:9000", online: true, release: relNew},
		{endpoint: "n2:9000", online: true, release: relNew},
		{endpoint: "n3:9000", online: true, release: relOld},
	})
	assert.Equal(t, "3/4 on "+relNew, s.nodesOn)
	assert.Equal(t, relOld, s.release, "status.release stays the oldest")
	assert.Equal(t, []v1.NodeRelease{{Endpoint: "n0:9000", Release: relNew}, {Endpoint: "n1:9000", Release: relNew}, {Endpoint: "n2:9000", Release: relNew}, {Endpoint: "n3:9000", Release: relOld}}, s.nodes)

	s.seen([]node{{endpoint: "n0:9000", online: true, release: relOld}, {endpoint: "n1:9000"}})
	assert.Equal(t, "1/2 on "+relOld, s.nodesOn, "an offline node runs nothing it can say")
	assert.Equal(t, []v1.NodeRelease{{Endpoint: "n0:9000", Release: relOld}, {Endpoint: "n1:9000", Release: ""}}, s.nodes)

	s.seen(nil)
	assert.Equal(t, "1/2 on "+relOld, s.nodesOn, "not reached: what was last said stays")

	many := make([]node, 300)
	for i := range many {
		many[i] = node{endpoint: "n", online: true, release: relNew}
	}
	s.seen(many)
	assert.Equal(t, "300/300 on "+relNew, s.nodesOn)
	assert.Len(t, s.nodes, v1.MaxListedNodes, "hundreds of nodes are counted, not each listed")
}

func TestAnUpdateThatEndsWritesTheNodesItSaw(t *testing.T) {
	f := newFixture(t, fakeBinaries{}, tenantStore("t", "s"))
	f.lead(t)
	f.admin("t", "s").releases = []string{relNew, relNew, relNew, relNew}
	require.NoError(t, f.c.sync(t.Context(), "t/s"))
	live := f.live(t, "t", "s")
	assert.Equal(t, "4/4 on "+relNew, live.Status.NodesOn)
	require.Len(t, live.Status.Nodes, 4)
	assert.Equal(t, v1.NodeRelease{Endpoint: "n0:9000", Release: relNew}, live.Status.Nodes[0])
}
