// Package trust keeps the operator's trust pool: the system roots, the
// cluster CA, and every certificate in the operator namespace's Secrets
// whose names start with aistor-ca-tls. The pool is rebuilt from scratch on
// every change and swapped whole, so a deleted Secret's CAs really stop
// being trusted.
package trust

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/pemutil"
)

// SecretPrefix starts the name of every Secret whose certificates are trusted.
const SecretPrefix = "aistor-ca-tls"

// Config configures a Pool.
type Config struct {
	Namespace string
	// Secrets is an informer over Namespace.
	Secrets coreinformers.SecretInformer
	// ClusterCA (PEM) is always trusted.
	ClusterCA []byte
	// SystemRoots are the base pool; nil means the host's.
	SystemRoots *x509.CertPool
	Log         zerolog.Logger
	Registerer  prometheus.Registerer
	// DialContext, if set, makes the transport's connections (the
	// registries' dialer pins and guards addresses); nil: Go's default.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Pool is the operator's live trust pool.
type Pool struct {
	cfg    Config
	log    zerolog.Logger
	lister corelisters.SecretLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	pool   atomic.Pointer[trusted]

	// unusable is what the last sync skipped (Unusable).
	unusable atomic.Pointer[[]string]

	fingerprint [32]byte // of the last pool built; only the sync goroutine touches it
	loaded      map[string][32]byte

	transportMu sync.Mutex
	transport   *http.Transport
	transportOf *x509.CertPool
}

// New returns a Pool holding the system roots and the cluster CA until Run
// has read the CA Secrets.
func New(cfg Config) (*Pool, error) {
	if cfg.SystemRoots == nil {
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		cfg.SystemRoots = roots
	}
	p := &Pool{
		cfg:    cfg,
		log:    cfg.Log.With().Str("component", "trust").Str("namespace", cfg.Namespace).Logger(),
		lister: cfg.Secrets.Lister(),
		synced: cfg.Secrets.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "trust"}),
		loaded: map[string][32]byte{},
	}
	if cfg.Registerer != nil {
		cas := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "objectstore_operator_trusted_cas",
			Help: "CA certificates trusted from aistor-ca-tls* Secrets (besides the system roots and the cluster CA).",
		}, func() float64 { return float64(p.pool.Load().cas) })
		if err := cfg.Registerer.Register(cas); err != nil {
			return nil, fmt.Errorf("register trust metrics: %w", err)
		}
	}
	base := cfg.SystemRoots.Clone()
	base.AppendCertsFromPEM(cfg.ClusterCA)
	p.pool.Store(&trusted{pool: base})
	_, err := cfg.Secrets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.enqueue,
		UpdateFunc: func(_, obj any) { p.enqueue(obj) },
		DeleteFunc: p.enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("watch CA Secrets: %w", err)
	}
	return p, nil
}

func (p *Pool) enqueue(obj any) {
	obj = controller.Unwrap(obj)
	if s, ok := obj.(*corev1.Secret); ok && s.Namespace == p.cfg.Namespace && strings.HasPrefix(s.Name, SecretPrefix) {
		// Any change rebuilds the one pool: one key.
		p.queue.Add("pool")
	}
}

// CertPool returns the current pool. Do not modify it.
func (p *Pool) CertPool() *x509.CertPool { return p.pool.Load().pool }

// trusted is one state of the pool, swapped whole.
type trusted struct {
	pool *x509.CertPool
	cas  int // certificates from CA Secrets in pool
}

// Transport returns a RoundTripper that verifies servers against the pool
// current at each request. Connections made under a replaced pool are
// closed when idle, so a removed CA is not trusted through a kept-alive
// connection either.
func (p *Pool) Transport() http.RoundTripper { return roundTripper{p} }

type roundTripper struct{ p *Pool }

func (rt roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	return rt.p.currentTransport().RoundTrip(r)
}

func (p *Pool) currentTransport() *http.Transport {
	pool := p.CertPool()
	p.transportMu.Lock()
	defer p.transportMu.Unlock()
	if p.transport == nil || p.transportOf != pool {
		if p.transport != nil {
			p.transport.CloseIdleConnections()
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
		if p.cfg.DialContext != nil {
			t.DialContext = p.cfg.DialContext
		}
		p.transport, p.transportOf = t, pool
	}
	return p.transport
}

// Unusable names each CA Secret content the last rebuild skipped
// ("<namespace>/<name>: <key>: <problem>", as the error it logs); nil
// before the first rebuild.
func (p *Pool) Unusable() []string {
	if u := p.unusable.Load(); u != nil {
		return *u
	}
	return nil
}

// Run rebuilds the pool on every change until ctx ends.
func (p *Pool) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), p.synced) {
		p.queue.ShutDown()
		return fmt.Errorf("trust: Secret informer did not sync")
	}
	p.queue.Add("pool")
	controller.Run(ctx, p.queue, 1, func(context.Context, string) error { return p.sync() }, nil)
	return nil
}

// sync builds a new pool from every CA Secret and swaps it in. A Secret
// with garbage is logged by name and reason and skipped; it does not
// disturb the others.
func (p *Pool) sync() error {
	secrets, err := p.lister.Secrets(p.cfg.Namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list CA Secrets: %w", err)
	}
	sort.Slice(secrets, func(i, j int) bool { return secrets[i].Name < secrets[j].Name })
	pool := p.cfg.SystemRoots.Clone()
	pool.AppendCertsFromPEM(p.cfg.ClusterCA)
	h := sha256.New()
	count := 0
	seen := map[string]bool{}
	unusable := []string{}
	for _, s := range secrets {
		if !strings.HasPrefix(s.Name, SecretPrefix) {
			continue
		}
		seen[s.Name] = true
		certs, problems := pemutil.Certificates(s)
		for _, problem := range problems {
			p.log.Error().Str("secret", s.Namespace+"/"+s.Name).Str("reason", problem).Msg("CA Secret has unusable content; skipping it, the rest is trusted")
			unusable = append(unusable, s.Namespace+"/"+s.Name+": "+problem)
		}
		var subjects []string
		sh := sha256.New()
		for _, c := range certs {
			pool.AddCert(c)
			h.Write(c.Raw)
			sh.Write(c.Raw)
			subjects = append(subjects, c.Subject.String())
		}
		count += len(certs)
		var sum [32]byte
		copy(sum[:], sh.Sum(nil))
		if p.loaded[s.Name] != sum {
			p.loaded[s.Name] = sum
			p.log.Info().Str("secret", s.Namespace+"/"+s.Name).Strs("subjects", subjects).Int("count", len(certs)).Msg("trusted CAs loaded")
		}
	}
	for name := range p.loaded {
		if !seen[name] {
			delete(p.loaded, name)
			p.log.Info().Str("secret", p.cfg.Namespace+"/"+name).Msg("CA Secret gone: its CAs are no longer trusted")
		}
	}
	p.unusable.Store(&unusable)
	var fp [32]byte
	copy(fp[:], h.Sum(nil))
	if fp != p.fingerprint {
		p.fingerprint = fp
		p.pool.Store(&trusted{pool: pool, cas: count})
	}
	return nil
}
