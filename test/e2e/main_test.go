// Package e2e runs the operator as its own process against the real
// control plane from test/cluster and drives it the way users do: curl,
// kubectl, helm and a Go walk of MinIO's update client.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/object-store-operator/operator/test/cluster"
)

var (
	testCluster *cluster.Cluster
	operatorBin string
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Tests that call t.Parallel mostly wait (operators starting, CSRs,
	// pulls); those that run MinIO clusters also take a minioSlot. Unless
	// -parallel is given, up to 6 run at once.
	parallelGiven := false
	flag.Visit(func(f *flag.Flag) { parallelGiven = parallelGiven || f.Name == "test.parallel" })
	if !parallelGiven {
		_ = flag.Set("test.parallel", "6")
	}
	os.Exit(run(m))
}

// minioSlots bounds the parallel tests that run MinIO (a cluster of four
// processes, or make run's): their start-up and warm-up are CPU-bound.
// Three at once on a 2-core machine finished the package 40-60 s sooner,
// but in one of three runs TestLeaderThatLeadsAgainStillIssues saw its
// CSR go unsigned for 15 s, which two at once never showed.
var minioSlots = make(chan struct{}, 2)

// minioSlot holds one of minioSlots until the test ends.
func minioSlot(t testing.TB) {
	t.Helper()
	select {
	case minioSlots <- struct{}{}:
	case <-t.Context().Done():
		t.Fatal("no MinIO slot before the test ended")
	}
	t.Cleanup(func() { <-minioSlots })
}

func run(m *testing.M) int {
	bin, remove, err := cluster.BuildOperator()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	operatorBin = bin
	// The chart's CRD, installed before kube-controller-manager starts so
	// the garbage collector knows ObjectStores from the beginning.
	return cluster.MainWith(m, &testCluster, cluster.Options{CRDs: []string{"../../helm/object-store-operator/crds"}})
}
