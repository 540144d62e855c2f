package e2e

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkImageChangeToUpdatedInPlace is `make bench-update`: a
// distributed MinIO of four processes on the older release, warmed up; the
// time from changing the ObjectStore's image to every node reporting the
// newer release (the operator pulls the ~110 MiB binary from the
// registry, calls MinIO, MinIO downloads, verifies and re-executes), and
// to VersionCurrent=True as kubectl shows it.
func BenchmarkImageChangeToUpdatedInPlace(b *testing.B) {
	for range b.N {
		b.StopTimer()
		e := newUpdateEnv(b, updateOpts{})
		e.waitVersion(b, metav1.ConditionTrue, "Current", 60*time.Second)
		e.minio.warm(b)
		b.StartTimer()
		start := time.Now()
		e.setImage(b, e.newImage)
		for !e.minio.allRun(b, e.newer) {
			if time.Since(start) > 3*time.Minute {
				b.Fatalf("nodes still not on %s: %v", e.newer, e.minio.versions(b))
			}
			time.Sleep(20 * time.Millisecond)
		}
		nodes := time.Since(start)
		e.waitVersion(b, metav1.ConditionTrue, "UpdatedInPlace", 3*time.Minute)
		b.ReportMetric(nodes.Seconds(), "s-to-all-nodes")
		b.ReportMetric(time.Since(start).Seconds(), "s-to-condition")
	}
}
