// Command operator is the object-store operator: it serves MinIO binaries
// to MinIO pods over TLS for in-place updates and keeps the certificates
// involved current. main only reads configuration and wires the parts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/object-store-operator/operator/autocert"
	"github.com/object-store-operator/operator/health"
	"github.com/object-store-operator/operator/upgradeserver"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	cfg, err := loadConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	log := zerolog.New(os.Stderr).Level(cfg.logLevel).With().Timestamp().Logger()
	if err != nil {
		log.Fatal().Err(err).Msg("invalid configuration")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Fatal().Err(err).Msg("operator stopped")
	}
	log.Info().Msg("operator stopped")
}

func run(ctx context.Context, cfg config, log zerolog.Logger) error {
	log.Info().Str("version", version).Msg("object-store-operator starting")
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	checks := &health.Checks{}

	store, err := upgradeserver.NewStore(cfg.updateDir, log, upgradeserver.StoreOptions{})
	if err != nil {
		return err
	}
	defer store.Close()
	checks.Add("update-store", store.Ready)

	g, ctx := errgroup.WithContext(ctx)
	var source upgradeserver.CertificateSource
	switch {
	case cfg.tlsCertFile != "":
		cur := autocert.NewCurrent(log, autocert.Validator{})
		checks.Add("serving-certificate", cur.Ready)
		source = cur
		g.Go(func() error { return autocert.WatchFiles(ctx, cur, cfg.tlsCertFile, cfg.tlsKeyFile, 10*time.Second) })
	case cfg.autoCertOff && cfg.customSecret == "":
		log.Warn().Msg("OPERATOR_AUTO_CERT_DISABLED=on and no OPERATOR_CUSTOM_TLS_SECRET_NAME: the upgrade server will serve plain HTTP")
	default:
		return fmt.Errorf("no serving certificate source: set --tls-cert-file/--tls-key-file (the CSR-based autocert and custom Secret modes are not built yet)")
	}

	srv := upgradeserver.New(upgradeserver.Config{
		Address:       cfg.upgradeAddress,
		Certificates:  source,
		Store:         store,
		Metrics:       upgradeserver.NewMetrics(reg),
		Log:           log,
		ShutdownGrace: cfg.shutdownGrace,
	})
	g.Go(func() error { return store.Run(ctx) })
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error { return health.Serve(ctx, cfg.metricsAddress, health.Handler(checks, reg), log) })
	return g.Wait()
}
