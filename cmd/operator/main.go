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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/autocert"
	"github.com/object-store-operator/operator/binsource"
	"github.com/object-store-operator/operator/health"
	"github.com/object-store-operator/operator/internal/logging"
	"github.com/object-store-operator/operator/mountsecret"
	"github.com/object-store-operator/operator/trust"
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
	logging.RouteKlog(log)
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

	kube, err := newKube(cfg)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	certMetrics := autocert.NewMetrics(reg)
	cert, err := certificateSource(ctx, g, cfg, kube, log, certMetrics, checks)
	if err != nil {
		return err
	}
	if kube != nil {
		if err := runKubernetesParts(ctx, g, cfg, kube, cert, store, log, reg, certMetrics); err != nil {
			return err
		}
	} else {
		log.Info().Msg("no Kubernetes configuration (KUBECONFIG or in-cluster): trust pool and mount-secret controller not started")
	}

	var source upgradeserver.CertificateSource
	if cert != nil {
		source = cert
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

// kube holds the clients and the operator-namespace informers shared by
// the parts that talk to Kubernetes.
type kube struct {
	rest      *rest.Config
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	namespace informers.SharedInformerFactory
}

// newKube returns nil when there is no Kubernetes to talk to (file or
// plain-HTTP mode outside a cluster).
func newKube(cfg config) (*kube, error) {
	inCluster := os.Getenv("KUBERNETES_SERVICE_HOST") != ""
	if cfg.kubeconfig == "" && !inCluster {
		if m := cfg.mode(); m == modeAutocert || m == modeCustomSecret {
			return nil, errors.New("this certificate mode needs Kubernetes: set KUBECONFIG or run in a cluster")
		}
		return nil, nil
	}
	if cfg.namespace == "" {
		return nil, errors.New("OPERATOR_NAMESPACE is not set and no service-account namespace is mounted")
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	restCfg.QPS, restCfg.Burst = cfg.qps, cfg.burst
	restCfg.UserAgent = "object-store-operator/" + version
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return &kube{
		rest: restCfg, client: cs, dynamic: dyn,
		// The periodic resync is the slow backstop in case an event was missed.
		namespace: informers.NewSharedInformerFactoryWithOptions(cs, cfg.resync, informers.WithNamespace(cfg.namespace)),
	}, nil
}

// runKubernetesParts starts the trust pool on every replica and, on the
// leader, the certificate issuer (autocert mode) and the mount-secret
// controller.
func runKubernetesParts(ctx context.Context, g *errgroup.Group, cfg config, k *kube, cert *autocert.Current, store *upgradeserver.Store, log zerolog.Logger, reg prometheus.Registerer, certMetrics *autocert.Metrics) error {
	pool, err := trust.New(trust.Config{
		Namespace: cfg.namespace, Secrets: k.namespace.Core().V1().Secrets(),
		ClusterCA: clusterCA(k.rest), Log: log, Registerer: reg,
	})
	if err != nil {
		return err
	}
	g.Go(func() error { return pool.Run(ctx) })

	var issuer *autocert.Issuer
	if cfg.mode() == modeAutocert {
		log.Info().Msg("Upgrade server Autocert is enabled, starting certificate setup")
		signer := cfg.signerName
		if signer == "" {
			signer = autocert.DetectSigner(ctx, k.client, log)
		}
		issuer, err = autocert.NewIssuer(autocert.IssuerConfig{
			Client: k.client, Secrets: k.namespace.Core().V1().Secrets(),
			Namespace: cfg.namespace, SecretName: cfg.autocertSecret,
			DNSNames: cfg.dnsNames(), SignerName: signer, Approve: cfg.approve,
			Timeout: cfg.csrTimeout, Expiration: cfg.expiration, RenewBefore: cfg.renewBefore,
			ServingCASecret: cfg.servingCASecret, ClusterCA: clusterCA(k.rest),
			Validator: autocert.Validator{DNSName: cfg.dnsNames()[0]}, Metrics: certMetrics, Log: log,
		})
		if err != nil {
			return err
		}
	}
	fetcher, err := binsource.NewFetcher(binsource.FetcherConfig{
		Store: store, Transport: pool.Transport(), Platforms: cfg.platforms, MaxSize: cfg.maxBinarySize,
		MirrorURL: cfg.mirrorURL, Concurrency: cfg.pullConcurrency, Registerer: reg, Log: log,
	})
	if err != nil {
		return err
	}
	k.namespace.Start(ctx.Done())

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k.client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "object-store-operator"})
	var operatorCA mountsecret.CABundleSource
	if cert != nil {
		operatorCA = cert
	}
	registered := false
	g.Go(func() error {
		defer broadcaster.Shutdown()
		return runAsLeader(ctx, cfg, k.client, log, func(ctx context.Context) error {
			lg, ctx := errgroup.WithContext(ctx)
			if issuer != nil {
				lg.Go(func() error { return issuer.Run(ctx) })
			}
			// Informers are made per leadership term: a stopped informer
			// cannot be started again.
			all := informers.NewSharedInformerFactory(k.client, cfg.resync)
			stores := dynamicinformer.NewDynamicSharedInformerFactory(k.dynamic, cfg.resync).ForResource(apiv1.Resource).Informer()
			var r prometheus.Registerer
			if !registered {
				r, registered = reg, true
			}
			ctrl, err := mountsecret.New(mountsecret.Config{
				Kube: k.client, Dynamic: k.dynamic,
				Secrets: all.Core().V1().Secrets(), StatefulSets: all.Apps().V1().StatefulSets(), ObjectStores: stores,
				OperatorCA: operatorCA, Recorder: recorder, Log: log, Registerer: r,
			})
			if err != nil {
				return err
			}
			binaries, err := binsource.NewController(binsource.ControllerConfig{
				Dynamic: k.dynamic, ObjectStores: stores, Secrets: all.Core().V1().Secrets(),
				Fetcher: fetcher, Keep: cfg.storeKeep, Recorder: recorder, Log: log,
			})
			if err != nil {
				return err
			}
			all.Start(ctx.Done())
			go stores.Run(ctx.Done())
			lg.Go(func() error { return ctrl.Run(ctx) })
			lg.Go(func() error { return binaries.Run(ctx) })
			return lg.Wait()
		})
	})
	return nil
}

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
		cur := autocert.NewCurrent(log, autocert.Validator{}, metrics)
		checks.Add("serving-certificate", cur.Ready)
		g.Go(func() error { return autocert.WatchFiles(ctx, cur, cfg.tlsCertFile, cfg.tlsKeyFile, 10*time.Second) })
		return cur, nil
	}

	cur := autocert.NewCurrent(log, autocert.Validator{DNSName: cfg.dnsNames()[0]}, metrics)
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
