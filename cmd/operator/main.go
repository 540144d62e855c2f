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

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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
	source, err := certificateSource(ctx, g, cfg, log, reg, checks)
	if err != nil {
		return err
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

// certificateSource wires the serving certificate for the configured mode
// and starts what keeps it current. A nil source means plain HTTP.
func certificateSource(ctx context.Context, g *errgroup.Group, cfg config, log zerolog.Logger, reg prometheus.Registerer, checks *health.Checks) (upgradeserver.CertificateSource, error) {
	metrics := autocert.NewMetrics(reg)
	switch cfg.mode() {
	case modePlainHTTP:
		log.Warn().Msg("OPERATOR_AUTO_CERT_DISABLED=on and no OPERATOR_CUSTOM_TLS_SECRET_NAME: the upgrade server serves plain HTTP, as AIStor documents; MinIO pods' updates travel unencrypted")
		return nil, nil
	case modeFiles:
		// The SANs of mounted certificates (OLM's, say) follow their
		// provider's naming, so only the key pair and validity are checked.
		cur := autocert.NewCurrent(log, autocert.Validator{}, metrics)
		checks.Add("serving-certificate", cur.Ready)
		g.Go(func() error { return autocert.WatchFiles(ctx, cur, cfg.tlsCertFile, cfg.tlsKeyFile, 10*time.Second) })
		return cur, nil
	}

	if err := cfg.needsKubernetes(); err != nil {
		return nil, err
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	// One informer over the operator namespace's Secrets; the periodic
	// resync is the slow backstop in case an event was missed.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, time.Minute, informers.WithNamespace(cfg.namespace))
	secrets := factory.Core().V1().Secrets()
	validator := autocert.Validator{DNSName: cfg.dnsNames()[0]}
	cur := autocert.NewCurrent(log, validator, metrics)
	checks.Add("serving-certificate", cur.Ready)

	kind, secretName := autocert.KindAutocert, cfg.autocertSecret
	if cfg.mode() == modeCustomSecret {
		kind, secretName = autocert.KindCustom, cfg.customSecret
		log.Info().Str("secret", cfg.namespace+"/"+secretName).Msg("Upgrade server TLS: serving the custom certificate from the Secret; changes take effect without a restart")
	}
	src, err := autocert.NewSecretSource(kind, cfg.namespace, secretName, cfg.servingCASecret, secrets, cur, log)
	if err != nil {
		return nil, err
	}
	if cfg.mode() == modeAutocert {
		log.Info().Msg("Upgrade server Autocert is enabled, starting certificate setup")
		signer := cfg.signerName
		if signer == "" {
			signer = autocert.DetectSigner(ctx, cs, log)
		}
		issuer, err := autocert.NewIssuer(autocert.IssuerConfig{
			Client: cs, Secrets: secrets,
			Namespace: cfg.namespace, SecretName: cfg.autocertSecret,
			DNSNames: cfg.dnsNames(), SignerName: signer, Approve: cfg.approve,
			Timeout: cfg.csrTimeout, Expiration: cfg.expiration, RenewBefore: cfg.renewBefore,
			ServingCASecret: cfg.servingCASecret, ClusterCA: clusterCA(restCfg),
			Validator: validator, Metrics: metrics, Log: log,
		})
		if err != nil {
			return nil, err
		}
		g.Go(func() error { return runAsLeader(ctx, cfg, cs, log, issuer.Run) })
	}
	factory.Start(ctx.Done())
	g.Go(func() error { return src.Run(ctx) })
	return cur, nil
}

// clusterCA is the CA the client trusts for the apiserver: the cluster CA.
func clusterCA(c *rest.Config) []byte {
	if len(c.CAData) > 0 {
		return c.CAData
	}
	if c.CAFile != "" {
		if b, err := os.ReadFile(c.CAFile); err == nil {
			return b
		}
	}
	return nil
}
