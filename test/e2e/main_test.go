// Package e2e runs the operator as its own process against the real
// control plane from test/cluster and drives it the way users do: curl,
// kubectl, helm and a Go walk of MinIO's update client.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/object-store-operator/operator/test/cluster"
)

var (
	testCluster *cluster.Cluster
	operatorBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "osop-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	operatorBin = filepath.Join(dir, "operator")
	build := exec.Command("go", "build", "-o", operatorBin, "../../cmd/operator")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build operator: %v\n", err)
		return 1
	}
	// The chart's CRD, installed before kube-controller-manager starts so
	// the garbage collector knows ObjectStores from the beginning.
	return cluster.MainWith(m, &testCluster, cluster.Options{CRDs: []string{"../../helm/object-store-operator/crds"}})
}
