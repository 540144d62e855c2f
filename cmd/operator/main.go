// Command operator is the object-store operator: it serves MinIO binaries
// to MinIO pods over TLS for in-place updates and keeps the certificates
// involved current. main only reads configuration and wires the parts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/util/workqueue"

	"github.com/object-store-operator/operator/autocert"
	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/health"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/logging"
	"github.com/object-store-operator/operator/upgradeserver"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	cfg, unknown, err := loadConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	log := zerolog.New(os.Stderr).Level(cfg.logLevel).With().Timestamp().Logger()
	if err != nil {
		log.Fatal().Err(err).Msg("invalid configuration")
	}
	if len(unknown) > 0 {
		log.Warn().Strs("variables", unknown).Str("reason", "unknown setting").
			Msg("ignoring OPERATOR_* environment variables this version does not know: a typo, or a setting of another version (docs/configuration.md lists them)")
	}
	logging.RouteKlog(log)
	setMemoryLimit(log)
	defer startGCFloor(log)()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Fatal().Err(err).Msg("operator stopped")
	}
	log.Info().Msg("operator stopped")
}

func run(ctx context.Context, cfg config, log zerolog.Logger) error {
	log.Info().Str("version", version).Msg("object-store-operator starting")
	reg := newRegistry()
	checks := &health.Checks{}
	reg.MustRegister(checks.Collector())

	kube, err := newKube(cfg)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg, kube, log, reg)
	if err != nil {
		return err
	}
	defer store.Close()
	checks.Add("binary-store", store.Ready)
	log.Info().Strs("trustedKeys", store.TrustedKeyIDs()).Msg("binaries are listed only when their .minisig verifies with one of these minisign keys")

	g, ctx := errgroup.WithContext(ctx)
	certMetrics := autocert.NewMetrics(reg)
	cert, err := certificateSource(ctx, g, cfg, kube, log, certMetrics, checks)
	if err != nil {
		return err
	}
	var clients upgradeserver.Clients
	if kube != nil {
		if clients, err = startKubernetesParts(ctx, g, parts{cfg: cfg, k: kube, cert: cert, store: store, log: log, reg: reg,
			certMetrics: certMetrics, checks: checks}); err != nil {
			return err
		}
	} else {
		log.Info().Msg("no Kubernetes configuration (KUBECONFIG or in-cluster): trust pool and mount-secret controller not started")
	}

	accessLog, flushAccessLog := newAccessLog(ctx, cfg)
	defer flushAccessLog()
	srv := upgradeserver.New(upgradeserver.Config{
		Address:                 cfg.upgradeAddress,
		Certificates:            certificateAs[upgradeserver.CertificateSource](cert),
		Store:                   store,
		Metrics:                 upgradeserver.NewMetrics(reg),
		Log:                     log,
		AccessLog:               accessLog,
		ShutdownGrace:           cfg.shutdownGrace,
		MaxDownloads:            cfg.maxDownloads,
		MaxConnections:          cfg.maxConns,
		StallTimeout:            downloadStallTimeout,
		MaxDownloadsPerClient:   cfg.clientDownloads,
		MaxConnectionsPerClient: cfg.clientConns,
		MinDownloadRate:         cfg.minDownloadRate,
		Clients:                 clients,
		BaseURL:                 cfg.podUpdateURL(),
		WriteTimeout:            responseWriteTimeout,
	})
	// Listening before anything can say ready: /readyz passing while the
	// upgrade server is not yet listening sent pods (and the tests) to a
	// refused connection.
	ln, err := net.Listen("tcp", cfg.upgradeAddress)
	if err != nil {
		return fmt.Errorf("upgrade server listen on %s: %w", cfg.upgradeAddress, err)
	}
	g.Go(func() error { return store.Run(ctx) })
	g.Go(func() error { return srv.Serve(ctx, ln) })
	g.Go(func() error {
		return health.Serve(ctx, cfg.metricsAddress, withProfiling(health.Handler(checks, reg)), log)
	})
	return g.Wait()
}

// newRegistry is the registry of every metric the operator exports, with
// the Go, process and build collectors, and client-go's workqueue metrics.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "objectstore_operator_build_info",
			Help:        "The operator's version (label version), always 1.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }))
	// Before any queue exists: client-go reads the provider when a queue is made.
	workqueue.SetProvider(controller.NewWorkqueueMetrics(reg))
	return reg
}

// openStore opens the binary store, with the platform signing key when
// one is configured (it is read from a Secret, so it needs Kubernetes).
func openStore(ctx context.Context, cfg config, kube *kube, log zerolog.Logger, reg prometheus.Registerer) (*binstore.Store, error) {
	storeOpts := binstore.Options{TrustedKeys: cfg.minisignKeys, Registerer: reg}
	if cfg.signingKey != "" {
		if kube == nil {
			return nil, errors.New("OPERATOR_SIGNING_KEY_SECRET needs Kubernetes: set KUBECONFIG or run in a cluster")
		}
		var err error
		if storeOpts.Signer, err = loadSigningKey(ctx, kube.client, cfg.namespace, cfg.signingKey); err != nil {
			return nil, err
		}
		log.Info().Str("secret", cfg.namespace+"/"+cfg.signingKey).Str("keyId", binstore.FormatKeyID(storeOpts.Signer.ID())).
			Msg("platform signing key loaded: binaries from verified images without a .minisig are signed with it")
	}
	return binstore.New(cfg.updateDir, log, storeOpts)
}

// newAccessLog is the upgrade server's access log (nil when it is off),
// and what flushes it: call that once everything, graceful shutdown
// included, has ended. Access lines are batched (one write per 100 ms,
// not per request).
func newAccessLog(ctx context.Context, cfg config) (*zerolog.Logger, func()) {
	if !cfg.accessLog {
		return nil, func() {}
	}
	accessOut := logging.NewBufferedWriter(os.Stderr, 100*time.Millisecond)
	flushCtx, stopFlushing := context.WithCancel(context.WithoutCancel(ctx))
	go accessOut.Run(flushCtx)
	l := zerolog.New(accessOut).Level(cfg.logLevel) // the server stamps each line
	return &l, func() {
		stopFlushing()
		accessOut.Flush()
	}
}

// The upgrade server's bounds on a client that stops reading: a download
// that made no progress for downloadStallTimeout, any other response not
// written within responseWriteTimeout, is dropped.
const (
	downloadStallTimeout = 60 * time.Second
	responseWriteTimeout = 30 * time.Second
)

// certificateSource wires the serving certificate for the configured mode
// and starts what keeps it current. A nil Current means plain HTTP.
func certificateSource(ctx context.Context, g *errgroup.Group, cfg config, k *kube, log zerolog.Logger, metrics *autocert.Metrics, checks *health.Checks) (*autocert.Current, error) {
	switch cfg.mode() {
	case modePlainHTTP:
		log.Warn().Msg("OPERATOR_AUTO_CERT_DISABLED=on and no OPERATOR_CUSTOM_TLS_SECRET_NAME: the upgrade server serves plain HTTP, as AIStor documents; MinIO pods' updates travel unencrypted")
		return nil, nil
	case modeFiles:
		// The SANs of mounted certificates (OLM's, say) follow their
		// provider's naming, so only the key pair and validity are checked.
		cur := autocert.NewCurrent(log, autocert.Validator{}, metrics, cfg.why.certs)
		checks.Add("serving-certificate", cur.Ready)
		g.Go(func() error { return autocert.WatchFiles(ctx, cur, cfg.tlsCertFile, cfg.tlsKeyFile, 10*time.Second) })
		return cur, nil
	}

	cur := autocert.NewCurrent(log, autocert.Validator{DNSName: cfg.dnsNames()[0]}, metrics, cfg.why.certs)
	checks.Add("serving-certificate", cur.Ready)
	kind, secretName := autocert.KindAutocert, cfg.autocertSecret
	if cfg.mode() == modeCustomSecret {
		kind, secretName = autocert.KindCustom, cfg.customSecret
		log.Info().Str("secret", cfg.namespace+"/"+secretName).Msg("Upgrade server TLS: serving the custom certificate from the Secret; changes take effect without a restart")
	}
	src, err := autocert.NewSecretSource(kind, cfg.namespace, secretName, cfg.servingCASecret, k.namespace.Core().V1().Secrets(), cur, log)
	if err != nil {
		return nil, err
	}
	g.Go(func() error { return src.Run(ctx) })
	return cur, nil
}
