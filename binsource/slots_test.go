package binsource

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"aead.dev/minisign"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/registryguard"
)

// slotHarness submits pulls that run until released and records the
// order they started in.
type slotHarness struct {
	t       *testing.T
	q       *pullQueue
	started chan string
	release map[string]chan struct{}
	ended   chan string
}

func newSlotHarness(t *testing.T, total, perNamespace, perRegistry int) *slotHarness {
	return &slotHarness{t: t, q: newPullQueue(total, perNamespace, perRegistry),
		started: make(chan string, 100), release: map[string]chan struct{}{}, ended: make(chan string, 100)}
}

// submit queues pull name of namespace ns against registry keys.
func (h *slotHarness) submit(ns, name string, keys ...string) func() {
	release := make(chan struct{})
	h.release[name] = release
	return h.q.submit(h.t.Context(), ns, name, func(context.Context) []string { return keys },
		func(ctx context.Context) (*Result, error) {
			h.started <- name
			select {
			case <-release:
				return &Result{Release: name}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}, func(r *Result, err error) { h.ended <- name })
}

// next returns the pull that starts next, failing when none does.
func (h *slotHarness) next() string {
	h.t.Helper()
	select {
	case n := <-h.started:
		return n
	case <-time.After(5 * time.Second):
		h.t.Fatal("no pull started")
		return ""
	}
}

// none checks that no pull starts now. In a synctest bubble its 50 ms
// pass once every goroutine of the bubble is blocked: whatever could
// start has.
func (h *slotHarness) none() {
	h.t.Helper()
	select {
	case n := <-h.started:
		h.t.Fatalf("pull %s started", n)
	case <-time.After(50 * time.Millisecond):
	}
}

// settle waits until every submitted pull resolved its registry and is
// queued or running.
func (h *slotHarness) settle(n int) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		running, queued := h.q.stats()
		h.q.mu.Lock()
		defer h.q.mu.Unlock()
		unresolved := 0
		for _, p := range h.q.pulls {
			if p.state == resolving {
				unresolved++
			}
		}
		return running+queued == n && unresolved == 0
	}, 5*time.Second, time.Millisecond)
}

func (h *slotHarness) finish(name string) {
	h.t.Helper()
	close(h.release[name])
	select {
	case <-h.ended:
	case <-time.After(5 * time.Second):
		h.t.Fatalf("pull %s did not end", name)
	}
}

func TestANamespaceHoldsAtMostItsShareOfPullSlots(t *testing.T) {
	// In a bubble: none() waits until every pull that could start has.
	synctest.Test(t, testANamespaceHoldsAtMostItsShareOfPullSlots)
}

func testANamespaceHoldsAtMostItsShareOfPullSlots(t *testing.T) {
	h := newSlotHarness(t, 4, 1, 4)
	for i := range 3 {
		h.submit("noisy", fmt.Sprintf("noisy-%d", i), fmt.Sprintf("10.0.0.%d:443", i))
	}
	h.settle(3)
	first := h.next()
	h.none() // three free slots, but the namespace has its one
	h.submit("quiet", "quiet-0", "10.0.1.0:443")
	assert.Equal(t, "quiet-0", h.next(), "another namespace gets a slot at once")
	h.finish(first)
	assert.Contains(t, h.next(), "noisy-", "the namespace's next pull takes the slot it freed")
	h.none()
}

// TestPullSlotsAreServedRoundRobinAcrossNamespaces: a namespace with many
// waiting pulls takes turns with one with a single pull; it cannot starve it.
func TestPullSlotsAreServedRoundRobinAcrossNamespaces(t *testing.T) {
	h := newSlotHarness(t, 1, 1, 1)
	h.submit("a", "a-0", "a:443")
	h.settle(1)
	assert.Equal(t, "a-0", h.next())
	for i := 1; i < 5; i++ {
		h.submit("a", fmt.Sprintf("a-%d", i), "a:443")
	}
	h.submit("b", "b-0", "b:443")
	h.submit("c", "c-0", "c:443")
	h.settle(7)
	var order []string
	last := "a-0"
	for range 6 {
		h.finish(last)
		last = h.next()
		order = append(order, last)
	}
	assert.Equal(t, []string{"a-1", "b-0", "c-0", "a-2", "a-3", "a-4"}, order)
}

// TestOneRegistryServerGetsAtMostItsShareOfPullSlots: pulls of one server
// (any key in common: an address and a name of it) share its slots, while
// another registry's pull proceeds.
func TestOneRegistryServerGetsAtMostItsShareOfPullSlots(t *testing.T) {
	// In a bubble: none() waits until every pull that could start has.
	synctest.Test(t, testOneRegistryServerGetsAtMostItsShareOfPullSlots)
}

func testOneRegistryServerGetsAtMostItsShareOfPullSlots(t *testing.T) {
	h := newSlotHarness(t, 4, 4, 2)
	h.submit("a", "by-address", "127.0.0.1:443")
	h.submit("b", "by-name", "127.0.0.1:443", "[::1]:443")
	h.settle(2)
	h.next()
	h.next()
	h.submit("c", "by-other-name", "[::1]:443", "127.0.0.1:443")
	h.settle(3)
	h.none()
	h.submit("d", "elsewhere", "10.0.0.9:443")
	assert.Equal(t, "elsewhere", h.next())
	h.finish("by-address")
	assert.Equal(t, "by-other-name", h.next())
}

func TestAPullNobodyWaitsForIsDroppedAndSharedPullsRunOnce(t *testing.T) {
	// In a bubble: none() waits until every pull that could start has.
	synctest.Test(t, testAPullNobodyWaitsForIsDroppedAndSharedPullsRunOnce)
}

func testAPullNobodyWaitsForIsDroppedAndSharedPullsRunOnce(t *testing.T) {
	h := newSlotHarness(t, 1, 1, 1)
	first := h.submit("a", "running", "r:443")
	h.settle(1)
	assert.Equal(t, "running", h.next())

	// Two ObjectStores wanting the same pull share it.
	got := make(chan error, 2)
	for range 2 {
		h.q.submit(t.Context(), "a", "shared", func(context.Context) []string { return []string{"s:443"} },
			func(context.Context) (*Result, error) { return nil, errors.New("the one run") },
			func(_ *Result, err error) { got <- err })
	}
	withdrawn := h.submit("a", "withdrawn", "w:443")
	h.settle(3)
	withdrawn()
	h.settle(2)

	// The running pull's only waiter withdraws: it is stopped.
	first()
	for range 2 {
		assert.EqualError(t, <-got, "the one run")
	}
	h.none()
	running, queued := h.q.stats()
	assert.Zero(t, running+queued, "nothing is kept once every pull ended")
	held, inLine := h.q.slots.Len()
	assert.Zero(t, held+inLine, "no slot held, nothing in line")
	h.q.mu.Lock()
	defer h.q.mu.Unlock()
	assert.Empty(t, h.q.pulls)
	assert.Empty(t, h.q.bySlot)
}

// TestAPullThatPanicsIsThatTenantsFailure: a pull parses a registry's
// bytes beside the workers; a panic there comes back to its waiter as a
// *controller.PanicError (the sync reports it InternalError), its slot is
// freed, and the process carries on.
func TestAPullThatPanicsIsThatTenantsFailure(t *testing.T) {
	q := newPullQueue(1, 1, 1)
	got := make(chan error, 1)
	q.submit(t.Context(), "hostile", "bomb", func(context.Context) []string { return []string{"registry"} },
		func(context.Context) (*Result, error) {
			var layers []int
			return nil, fmt.Errorf("layer %d", layers[3])
		}, func(_ *Result, err error) { got <- err })
	var p *controller.PanicError
	require.ErrorAs(t, <-got, &p)
	assert.Contains(t, fmt.Sprint(p.Value), "index out of range")

	next := make(chan error, 1)
	q.submit(t.Context(), "other", "fine", func(context.Context) []string { return []string{"registry"} },
		func(context.Context) (*Result, error) { return &Result{}, nil }, func(_ *Result, err error) { next <- err })
	assert.NoError(t, <-next, "the slot came back")
}

// TestAPullCountsOnlyAgainstTheAddressItDials: a tenant's registry name
// may answer DNS with its own hanging server plus the address of a
// registry other namespaces pull from. Its pull counts against, and
// connects to, one of those addresses only, the lowest. When that is its
// own, the shared registry's share stays free and another namespace's
// pull from it runs at once (it used to wait for the hanging pull's
// timeout: every resolved address was a key). When it is the shared
// registry's, the pull really goes there, which answers, so it cannot
// hang there; the hanging server is never contacted. (Found as
// TestAttackBorrowedRegistryAddressesHoldOtherRegistriesShares.)
func TestAPullCountsOnlyAgainstTheAddressItDials(t *testing.T) {
	for _, tt := range []struct {
		name             string
		hanging, shared  string
		hangingContacted bool
	}{
		{"its own address is the lowest", "127.0.0.2", "127.0.0.3", true},
		{"the shared registry's address is the lowest", "127.0.0.5", "127.0.0.4", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hang, err := net.Listen("tcp", tt.hanging+":0")
			require.NoError(t, err)
			t.Cleanup(func() { hang.Close() })
			port := strconv.Itoa(hang.Addr().(*net.TCPAddr).Port)
			var contacted atomic.Int64
			go func() {
				for {
					c, err := hang.Accept()
					if err != nil {
						return
					}
					contacted.Add(1)
					t.Cleanup(func() { c.Close() })
				}
			}()
			sharedLn, err := net.Listen("tcp", net.JoinHostPort(tt.shared, port))
			require.NoError(t, err)
			srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
			srv.Listener.Close()
			srv.Listener = sharedLn
			srv.StartTLS()
			t.Cleanup(srv.Close)

			key := binstoretest.NewKey(t)
			bin := []byte("the binary")
			img := singleLayerImage(t, gzipTar(t, map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": key.Sign(t, bin)}, 0))
			cfg, err := img.ConfigFile()
			require.NoError(t, err)
			cfg.OS, cfg.Architecture, cfg.Config.Labels = "linux", "amd64", map[string]string{"release": "RELEASE.X"}
			img, err = mutate.ConfigFile(img, cfg)
			require.NoError(t, err)
			insecure := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // the test's certificate names neither host
			ref, err := name.ParseReference(net.JoinHostPort(tt.shared, port) + "/minio/aistor:RELEASE.X")
			require.NoError(t, err)
			require.NoError(t, remote.Write(ref, img, remote.WithTransport(insecure)))

			transport := insecure.Clone()
			transport.DialContext = registryguard.Dialer(&net.Dialer{})
			f := testFetcher(t, binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}}, FetcherConfig{
				Transport: transport, Platforms: []Platform{{"linux", "amd64"}}, PullTimeout: time.Minute, Concurrency: 2,
				Resolver: fakeResolver{"evil.example": {tt.hanging, tt.shared}, "shared.mirror": {tt.shared}},
			})
			anonymous := &keychain{Keychain: authn.NewMultiKeychain()}
			attacker := make(chan error, 1)
			withdraw := f.Submit(t.Context(), "attacker", "", "evil.example:"+port+"/minio/aistor:RELEASE.X", anonymous, func(_ *Result, err error) { attacker <- err })
			defer withdraw()
			if tt.hangingContacted {
				require.Eventually(t, func() bool { return contacted.Load() > 0 }, 5*time.Second, 5*time.Millisecond, "the attacker's pull dials its own server")
			}
			victim := make(chan error, 1)
			start := time.Now()
			f.Submit(t.Context(), "victim", "", "shared.mirror:"+port+"/minio/aistor:RELEASE.X", anonymous, func(_ *Result, err error) { victim <- err })
			select {
			case err := <-victim:
				require.NoError(t, err)
				t.Logf("the victim's pull from shared.mirror ended after %s", time.Since(start).Round(time.Millisecond))
			case <-time.After(10 * time.Second):
				t.Fatal("the victim's pull from shared.mirror did not end within 10 s although a slot was free")
			}
			if !tt.hangingContacted {
				select {
				case <-attacker: // answered by the shared registry, which serves any name
				case <-time.After(10 * time.Second):
					t.Fatal("the attacker's pull, dialled to the shared registry, did not end")
				}
				assert.Zero(t, contacted.Load(), "the hanging server behind the attacker's name was not dialled")
			}
		})
	}
}
