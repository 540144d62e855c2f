package cluster

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// Main starts one control plane for a test package, stores it in *c, runs
// the tests and stops it. When a test failed it prints the tail of every
// component's log first. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(cluster.Main(m, &testCluster)) }
func Main(m *testing.M, c **Cluster) int {
	return MainWith(m, c, Options{})
}

// MainWith is Main with options, for example CRDs to install.
func MainWith(m *testing.M, c **Cluster, opts Options) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	started, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "start control plane: %v\n", err)
		return 1
	}
	*c = started
	code := m.Run()
	if code != 0 {
		started.PrintLogTails(os.Stderr, 40)
	}
	started.Stop()
	return code
}
