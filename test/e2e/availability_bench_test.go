package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/test/cluster"
)

// BenchmarkAvailability is `make bench-availability`: what an S3 client of
// a 4-node MinIO (EC:2, its pods run by minioKubelet) sees while its pods
// are restarted or its release changes, the operator's way and the other
// way side by side. The client writes an object and reads it back every
// 50 ms, round-robin over the nodes, and tries a failed request once more
// on the next node, as a Service would route it elsewhere. Per scenario:
// the requests that failed even so, and the longest time between two
// successful ones.
//
// One cluster holds the restarts and both in-place updates: (b) a
// certificate rotated (the operator replaces the pods one at a time,
// asking MinIO) and `kubectl rollout restart` (the statefulset controller
// on its own), both under RollingUpdate; then, under OnDelete (what
// docs/restarts.md names for tenants updated in place), (a) the operator's
// in-place update older -> newer and `mc admin update` by hand newer ->
// hotfix. MinIO refuses a downgrade in place, so the by-hand update takes
// the next release rather than a second cluster: the same nodes, disks and
// warm-up, one stamped build of the same source after another. (c) the
// rolling fallback needs MinIO started with MINIO_UPDATE=off (it answers
// MethodNotAllowed, as TestUpdateOffFallsBackToARollingUpdate has it),
// which would forbid the by-hand update: it runs on a second cluster of the
// same shape, after the first is gone.
func BenchmarkAvailability(b *testing.B) {
	// A benchmark's log keeps 10 lines: each failure, each gap over 1 s
	// and what the operator and MinIO logged go to a file.
	root, err := cluster.RepoRoot()
	require.NoError(b, err)
	path := filepath.Join(root, ".local", "bench", "availability.log")
	require.NoError(b, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.Create(path)
	require.NoError(b, err)
	defer f.Close()
	var results []availabilityResult
	b.Run("restarts-and-updates", func(b *testing.B) {
		for range b.N {
			results = append(results, restartsAndUpdates(b, f)...)
		}
	})
	b.Run("rolling-fallback", func(b *testing.B) {
		for range b.N {
			results = append(results, rollingFallback(b, f))
		}
	})
	b.Logf("each failure and gap over 1 s, the operator's rollout and update lines, the MinIO nodes' logs: %s", path)
	var table strings.Builder
	fmt.Fprintf(&table, "%-22s %9s %7s %11s %8s %9s\n", "scenario", "requests", "failed", "max gap ms", "took s", "replaced")
	for _, r := range results {
		fmt.Fprintf(&table, "%-22s %9d %7d %11d %8.1f %9d\n", r.name, r.requests, r.failed, r.maxGap.Milliseconds(), r.took.Seconds(), r.replaced)
	}
	// A parent benchmark's log shows only under -v (or when it fails):
	// the table goes to the file too.
	fmt.Fprintf(f, "== the table\n%s", table.String())
	b.Logf("availability (goals: b and c no failed request and no gap over 1 s; a-operator no gap longer than a-by-hand):\n%s", table.String())
}

// availabilityResult is what the client saw in one scenario.
type availabilityResult struct {
	name             string
	requests, failed int
	maxGap, took     time.Duration
	replaced         int // pods taken down
	errs, gaps       []string
}

const clock = "15:04:05.000"

// writeEvidence writes what explains the figures: the operator's lines
// about replacing pods and updating MinIO, and each node's log.
func writeEvidence(w io.Writer, e *updateEnv) {
	fmt.Fprintln(w, "-- the operator")
	for _, l := range strings.Split(e.op.logs.String(), "\n") {
		for _, m := range []string{`"reason":"ReplacingPod"`, "WaitingForQuorum", "MinIO in place", "dry run", "rolling", "restart"} {
			if strings.Contains(l, m) && !strings.Contains(l, `"message":"request"`) {
				fmt.Fprintln(w, l)
				break
			}
		}
	}
	for i, n := range e.minio.nodes {
		fmt.Fprintf(w, "-- MinIO node %d\n%s\n", i, tailLines(n.logs.String(), 60))
	}
}

func restartsAndUpdates(b *testing.B, w io.Writer) []availabilityResult {
	b.StopTimer()
	e, k, ca := availabilityCluster(b, updateOpts{deferMinIO: true})
	p := startS3Prober(b, e.minio)
	defer writeEvidence(w, e)
	var out []availabilityResult
	sts := func() *appsv1.StatefulSet {
		s, err := adminClient(b).AppsV1().StatefulSets(e.tenantNS).Get(b.Context(), "minio", metav1.GetOptions{})
		require.NoError(b, err)
		return s
	}
	b.StartTimer()

	// (b) A new server certificate from the same CA: the operator
	// replaces the pods one at a time, each after MinIO's maintenance
	// check says 200.
	out = append(out, measureAvailability(b, w, "b-operator-cert", p, k, func() {
		_, before, _, _ := k.figures()
		putNamedSecret(b, e.tenantNS, "tenant-tls", tenantTLS(b, ca))
		waitFor(b, 5*time.Minute, "every pod replaced by the operator's rollout", func() bool {
			_, replaced, _, _ := k.figures()
			_, held := sts().Annotations[apiv1.RolloutAnnotation]
			return len(replaced) >= len(before)+4 && !held && k.allReady()
		})
	}))
	// (b) The statefulset controller alone, from the highest ordinal down,
	// the next once the one before is Ready.
	out = append(out, measureAvailability(b, w, "b-kubectl-restart", p, k, func() {
		_, before, _, _ := k.figures()
		kubectl(b, "rollout", "restart", "statefulset/minio", "-n", e.tenantNS)
		waitFor(b, 5*time.Minute, "every pod replaced by the statefulset controller", func() bool {
			_, replaced, _, _ := k.figures()
			s := sts()
			return len(replaced) >= len(before)+4 && k.allReady() &&
				s.Status.UpdatedReplicas == 4 && s.Status.CurrentRevision == s.Status.UpdateRevision
		})
	}))

	// The in-place updates, under OnDelete: under RollingUpdate the
	// StatefulSet's new image would replace every pod once more after the
	// operator's update (docs/restarts.md), which mc by hand never does.
	kubectl(b, "patch", "statefulset", "minio", "-n", e.tenantNS, "--type=merge", "-p",
		`{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null}}}`)
	// Every node has just started: MinIO damages its own push until warm.
	e.minio.warm(b)
	out = append(out, measureAvailability(b, w, "a-operator-update", p, k, func() {
		e.setImage(b, e.newImage)
		e.waitVersion(b, metav1.ConditionTrue, "UpdatedInPlace", 3*time.Minute)
		waitFor(b, time.Minute, "every node on "+e.newer, func() bool { return e.minio.allRun(b, e.newer) })
	}))

	hotfix, err := cluster.MinIOHotfixRelease()
	require.NoError(b, err)
	hotfixPath, err := cluster.MinIOBinary(hotfix)
	require.NoError(b, err)
	bin, err := os.ReadFile(hotfixPath)
	require.NoError(b, err)
	hotfixImage := e.reg.pushImage(b, "minio/aistor:"+hotfix, imageSpec{binary: bin, releaseLbl: hotfix})
	kubectl(b, "annotate", "objectstore", e.store, "-n", e.tenantNS, apiv1.UpdatesPausedAnnotation+"=true")
	e.setImage(b, hotfixImage)
	e.waitVersion(b, metav1.ConditionFalse, "UpdatesPaused", 60*time.Second)
	own := waitBinaryStatus(b, e.tenantNS, e.store, bin)
	mc := mcClient(b, e.certs)
	mc(b, "alias", "set", "tenant", fmt.Sprintf("https://127.0.0.1:%d", e.minioPorts[0]), e.minio.user, e.minio.pass)
	// The operator's update just re-executed every node.
	e.minio.warm(b)
	out = append(out, measureAvailability(b, w, "a-by-hand-mc", p, k, func() {
		res := mc(b, "admin", "update", "tenant", own.URL, "--yes", "--json")
		require.Contains(b, res, `"status":"success"`, res)
		// A hotfix build reports the time of its release.
		plain, _, _ := strings.Cut(hotfix, ".hotfix.")
		waitFor(b, time.Minute, "every node on "+hotfix, func() bool { return e.minio.allRun(b, plain) })
	}))
	return out
}

func rollingFallback(b *testing.B, w io.Writer) availabilityResult {
	b.StopTimer()
	e, k, _ := availabilityCluster(b, updateOpts{deferMinIO: true, minioEnv: []string{"MINIO_UPDATE=off"}})
	e.waitVersion(b, metav1.ConditionTrue, "Current", 60*time.Second)
	p := startS3Prober(b, e.minio)
	defer writeEvidence(w, e)
	b.StartTimer()
	// (c) MinIO refuses the update in place (MethodNotAllowed); the
	// operator rolls the pods onto the new image through its rollout.
	return measureAvailability(b, w, "c-rolling-fallback", p, k, func() {
		_, before, _, _ := k.figures()
		e.setImage(b, e.newImage)
		c := e.waitVersion(b, metav1.ConditionFalse, "RollingUpdate", 2*time.Minute)
		b.Logf("c-rolling-fallback: %s", c.Message)
		// Not required: a node restarted on another binary than its
		// peers' may never join them (MinIO compares the binaries'
		// checksums at start), and then MinIO's maintenance check holds
		// the rollout. What the client saw until then is the figure.
		done := func() bool {
			_, replaced, _, _ := k.figures()
			return len(replaced) >= len(before)+4 && k.allReady() && e.minio.allRun(b, e.newer)
		}
		for deadline := time.Now().Add(3 * time.Minute); !done(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				pods := conditionOf(b, e.tenantNS, e.store, apiv1.ConditionPodsCurrent)
				b.Logf("c-rolling-fallback: not over after 3m: PodsCurrent=%s %s: %s; nodes %v", pods.Status, pods.Reason, pods.Message, e.minio.versions(b))
				return
			}
		}
	})
}

// availabilityCluster is newUpdateEnv's tenant on four real MinIO nodes
// that minioKubelet runs as the pods of one StatefulSet, "minio", under
// RollingUpdate. Its server certificate is signed by a CA (returned)
// rather than self-signed: during a rotation, nodes still on the old
// certificate must trust the new one, as they do when cert-manager renews
// a leaf from the same issuer.
func availabilityCluster(b *testing.B, o updateOpts) (*updateEnv, *minioKubelet, *testutil.CA) {
	b.Helper()
	e := newUpdateEnv(b, o)
	// The env's own StatefulSet has pods no MinIO runs in.
	require.NoError(b, adminClient(b).AppsV1().StatefulSets(e.tenantNS).Delete(b.Context(), poolName(e.store), metav1.DeleteOptions{}))
	ca := e.useTenantCA(b)
	e.startMinIO(b)
	k := newMinIOKubelet(b, e.minio, e.tenantNS, e.store, map[string]int{"minio-0": 0, "minio-1": 1, "minio-2": 2, "minio-3": 3})
	minioStatefulSet(b, e.tenantNS, e.store, "minio", 4, e.oldImage, appsv1.RollingUpdateStatefulSetStrategyType)
	waitFor(b, time.Minute, "the four pods run the four nodes", k.allReady)
	// The operator restarts a StatefulSet whose template does not yet
	// name the certificates it mounts, a new one too (seen in every run:
	// "replacing pod minio-3" right after it was created); the scenarios
	// start once that rollout is over.
	waitFirstRestart(b, e.tenantNS, "minio")
	waitFor(b, time.Minute, "the four pods back after the first rollout", k.allReady)
	return e, k, ca
}

// useTenantCA gives the tenant a server certificate signed by a CA of its
// own, as cert-manager would, before its nodes start: a new certificate
// from the same CA is then a rotation its running nodes verify, where a
// new self-signed one is a CA change without overlap (docs/restarts.md).
// names are the certificate's (default: 127.0.0.1).
func (e *updateEnv) useTenantCA(t testing.TB, names ...string) *testutil.CA {
	t.Helper()
	ca := testutil.NewCA(t, "tenant-ca")
	secret := tenantTLS(t, ca, names...)
	putNamedSecret(t, e.tenantNS, "tenant-tls", secret)
	waitFor(t, 30*time.Second, "the generated Secret with the CA-signed certificate", func() bool {
		gen, err := generated(t, e.tenantNS, e.store)
		return err == nil && bytes.Contains(gen.Data["public.crt"], secret["tls.crt"])
	})
	gen, err := generated(t, e.tenantNS, e.store)
	require.NoError(t, err)
	e.certs = cluster.MinIOCertsDir(gen.Data)
	e.roots = x509.NewCertPool()
	for rel, v := range e.certs {
		if strings.HasPrefix(rel, "CAs/") {
			e.roots.AppendCertsFromPEM(v)
		}
	}
	return ca
}

// tenantTLS is the data of a server certificate Secret for names
// (default: 127.0.0.1), signed by ca.
func tenantTLS(t testing.TB, ca *testutil.CA, names ...string) map[string][]byte {
	t.Helper()
	if len(names) == 0 {
		names = []string{"127.0.0.1"}
	}
	leaf := ca.Leaf(t, names...)
	key, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	require.NoError(t, err)
	return map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}),
		"ca.crt":  ca.PEM,
	}
}

// allReady: every node runs for its pod and answers ready.
func (k *minioKubelet) allReady() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.running) == len(k.nodeOf) && k.down == 0
}

func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, within, 100*time.Millisecond, what)
}

// measureAvailability runs act with the client's requests counted from 1 s
// before it until 2 s after it returns (a node may fail a request right
// after it says it is ready).
func measureAvailability(b *testing.B, w io.Writer, name string, p *s3Prober, k *minioKubelet, act func()) availabilityResult {
	b.Helper()
	_, before, _, _ := k.figures()
	from := time.Now()
	time.Sleep(time.Second)
	start := time.Now()
	act()
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	to := time.Now()
	r := p.window(from, to)
	_, after, _, _ := k.figures()
	r.name, r.took, r.replaced = name, took, len(after)-len(before)
	b.ReportMetric(float64(r.failed), "failed/"+name)
	b.ReportMetric(float64(r.maxGap.Milliseconds()), "gap-ms/"+name)
	summary := fmt.Sprintf("%s: %d requests, %d failed, longest gap %s, took %s, %d pods replaced %v",
		name, r.requests, r.failed, r.maxGap.Round(time.Millisecond), took.Round(time.Millisecond), r.replaced, after[len(before):])
	b.Log(summary)
	fmt.Fprintf(w, "== %s (%s to %s, the change from %s)\n", summary, from.Format(clock), to.Format(clock), start.Format(clock))
	for _, l := range r.errs {
		fmt.Fprintf(w, "failed %s\n", l)
	}
	for _, g := range r.gaps {
		fmt.Fprintf(w, "gap %s\n", g)
	}
	return r
}

// s3Prober is the tenant's S3 client: every 50 ms it writes an object and
// reads it back, each request to the next node in turn, a failed one tried
// once more on the node after (as a Service routes a new connection to
// another endpoint). minio-go's own retries are off: the one retry is the
// prober's.
type s3Prober struct {
	clients []*minio.Client
	mu      sync.Mutex
	oks     []time.Time
	fails   []probeFailure
}

type probeFailure struct {
	at  time.Time
	err string
}

const probeBucket = "availability"

func startS3Prober(t testing.TB, m *minioCluster) *s3Prober {
	t.Helper()
	p := &s3Prober{}
	for _, port := range m.ports {
		c, err := minio.New(fmt.Sprintf("127.0.0.1:%d", port), &minio.Options{
			Creds: credentials.NewStaticV4(m.user, m.pass, ""), Secure: true, Region: "us-east-1", MaxRetries: 1,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.roots}},
		})
		require.NoError(t, err)
		p.clients = append(p.clients, c)
	}
	waitFor(t, time.Minute, "the bucket "+probeBucket, func() bool {
		err := p.clients[0].MakeBucket(t.Context(), probeBucket, minio.MakeBucketOptions{})
		return err == nil || minio.ToErrorResponse(err).Code == "BucketAlreadyOwnedByYou"
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		next := 0
		// The read is of the last object written: a write that failed
		// counts once, not again as a read of nothing.
		var lastKey string
		var last []byte
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			key, body := fmt.Sprintf("probe/%d", n), []byte(fmt.Sprintf("write %d at %s", n, time.Now().Format(time.RFC3339Nano)))
			if p.do(ctx, &next, func(ctx context.Context, c *minio.Client) error {
				_, err := c.PutObject(ctx, probeBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
				return err
			}) {
				lastKey, last = key, body
			}
			if lastKey == "" {
				continue
			}
			key, body = lastKey, last
			p.do(ctx, &next, func(ctx context.Context, c *minio.Client) error {
				o, err := c.GetObject(ctx, probeBucket, key, minio.GetObjectOptions{})
				if err != nil {
					return err
				}
				defer o.Close()
				got, err := io.ReadAll(o)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, body) {
					return fmt.Errorf("read %q, wrote %q", got, body)
				}
				return nil
			})
		}
	}()
	return p
}

// do sends one request to the next node, and once more to the node after
// it if that failed; each attempt has 2 s. It reports whether one did.
func (p *s3Prober) do(ctx context.Context, next *int, req func(context.Context, *minio.Client) error) bool {
	var errs []string
	for attempt := range 2 {
		node := *next % len(p.clients)
		if attempt == 0 {
			*next++
		}
		if attempt == 1 {
			node = (node + 1) % len(p.clients)
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := req(actx, p.clients[node])
		cancel()
		if ctx.Err() != nil {
			return false // the bench is over, not MinIO
		}
		if err == nil {
			p.mu.Lock()
			p.oks = append(p.oks, time.Now())
			p.mu.Unlock()
			return true
		}
		errs = append(errs, fmt.Sprintf("node %d: %v", node, err))
	}
	p.mu.Lock()
	p.fails = append(p.fails, probeFailure{at: time.Now(), err: strings.Join(errs, "; then ")})
	p.mu.Unlock()
	return false
}

// window counts the requests that ended in [from, to], those that failed
// after their retry (with the first few errors), and the longest time
// without a successful one (from and to count as bounds).
func (p *s3Prober) window(from, to time.Time) availabilityResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	var r availabilityResult
	prev := from
	gap := func(until time.Time) {
		d := until.Sub(prev)
		r.maxGap = max(r.maxGap, d)
		if d > time.Second {
			r.gaps = append(r.gaps, fmt.Sprintf("%s to %s: %s", prev.Format(clock), until.Format(clock), d.Round(time.Millisecond)))
		}
	}
	for _, ok := range p.oks {
		if ok.Before(from) || ok.After(to) {
			continue
		}
		r.requests++
		gap(ok)
		prev = ok
	}
	gap(to)
	for _, f := range p.fails {
		if f.at.Before(from) || f.at.After(to) {
			continue
		}
		r.requests++
		r.failed++
		r.errs = append(r.errs, f.at.Format(clock)+" "+f.err)
	}
	return r
}
