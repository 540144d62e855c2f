package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/autocert"
	"github.com/object-store-operator/operator/binsource"
	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/health"
	"github.com/object-store-operator/operator/internal/claim"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/placement"
	"github.com/object-store-operator/operator/internal/secretcache"
	"github.com/object-store-operator/operator/mountsecret"
	objstatus "github.com/object-store-operator/operator/status"
	"github.com/object-store-operator/operator/trust"
	"github.com/object-store-operator/operator/updates"
)

// The namespace claim: read every claimInterval until held, then every
// quarter of claimDuration; a claim not renewed for claimDuration is dead
// (internal/claim).
const (
	claimDuration = 30 * time.Second
	claimInterval = 2 * time.Second
)

// kube holds the clients and the operator-namespace informers shared by
// the parts that talk to Kubernetes.
type kube struct {
	rest      *rest.Config
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	metadata  metadata.Interface
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
	meta, err := metadata.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes metadata client: %w", err)
	}
	return &kube{
		rest: restCfg, client: cs, dynamic: dyn, metadata: meta,
		// The periodic resync is the slow backstop in case an event was missed.
		namespace: informers.NewSharedInformerFactoryWithOptions(cs, cfg.resync, informers.WithNamespace(cfg.namespace),
			informers.WithTransform(controller.TrimForCache)),
	}, nil
}

// leaderWork is what only the leader does: issue certificates (autocert
// mode), keep mount Secrets, report binary conditions, drive updates.
// Every controller is built once and runs for the life of the process;
// a leadership term only lets it act (docs/development.md).
type leaderWork struct {
	issuer   *autocert.Issuer
	binaries *binsource.Controller
	mount    *mountsecret.Controller
	updates  *updates.Controller
}

// startKubernetesParts starts on every replica the trust pool and the
// binary source (every replica fills its own store), and the leader's
// work under leader election.
func startKubernetesParts(ctx context.Context, g *errgroup.Group, cfg config, k *kube, cert *autocert.Current,
	store *binstore.Store, log zerolog.Logger, reg prometheus.Registerer, certMetrics *autocert.Metrics, checks *health.Checks) error {
	pool, err := trust.New(trust.Config{
		Namespace: cfg.namespace, Secrets: k.namespace.Core().V1().Secrets(),
		ClusterCA: clusterCA(k.rest), Log: log, Registerer: reg,
		// The pool's transport is the registries' (and the mirror's):
		// http.DefaultTransport's dialer, pinned and guarded per pull.
		DialContext: binsource.RegistryDialer(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}),
	})
	if err != nil {
		return err
	}
	urlKey, err := loadURLKey(ctx, k.client, cfg.namespace)
	if err != nil {
		return err
	}
	w := &leaderWork{}
	if cfg.mode() == modeAutocert {
		if w.issuer, err = newIssuer(ctx, cfg, k, log, certMetrics); err != nil {
			return err
		}
	}
	fetcher, err := binsource.NewFetcher(binsource.FetcherConfig{
		Store: store, Transport: pool.Transport(), Platforms: cfg.platforms, MaxSize: cfg.maxBinarySize,
		MaxPullBytes: cfg.pullMaxBytes, PullTimeout: cfg.pullTimeout, InsecureRegistries: cfg.insecureRegs,
		MirrorURL: cfg.mirrorURL, Concurrency: cfg.pullConcurrency, PerNamespace: cfg.pullPerNS,
		StoreMaxBytes: cfg.storeMaxBytes, NamespaceMaxBytes: cfg.storeNSMaxBytes,
		Resolver: net.DefaultResolver, Registerer: reg, Log: log,
	})
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k.client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "object-store-operator"})

	// One informer of each for the life of the process, over the watched
	// namespaces (every namespace when none is set). What they hold is what
	// the operator's memory grows with (docs/development.md): ObjectStores,
	// the labelled StatefulSets, and Secrets as metadata only.
	watched := cfg.watchNamespaces
	if len(watched) == 0 {
		watched = []string{metav1.NamespaceAll}
	}
	stores := newNamespacedInformers(watched, func(ns string) cache.SharedIndexInformer {
		return dynamicinformer.NewFilteredDynamicSharedInformerFactory(k.dynamic, cfg.resync, ns, nil).ForResource(apiv1.Resource).Informer()
	})
	if err := stores.SetTransform(controller.TrimForCache); err != nil {
		return err
	}
	secrets := newNamespacedInformers(watched, func(ns string) cache.SharedIndexInformer {
		return metadatainformer.NewFilteredMetadataInformer(k.metadata, corev1.SchemeGroupVersion.WithResource("secrets"),
			ns, cfg.resync, cache.Indexers{}, nil).Informer()
	})
	if err := secrets.SetTransform(secretcache.TrimMetadata); err != nil {
		return err
	}
	tenantSets := statefulSetInformer{newNamespacedInformers(watched, func(ns string) cache.SharedIndexInformer {
		return informers.NewSharedInformerFactoryWithOptions(k.client, cfg.resync, informers.WithNamespace(ns),
			informers.WithTransform(controller.TrimForCache),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = apiv1.ObjectStoreLabel }),
		).Apps().V1().StatefulSets().Informer()
	})}
	// Where tenants' pods run, for the platform of their binary: StatefulSet
	// pods of the watched namespaces only (the label the statefulset
	// controller sets) and Nodes, each trimmed to what placement reads.
	pods := newNamespacedInformers(watched, func(ns string) cache.SharedIndexInformer {
		return informers.NewSharedInformerFactoryWithOptions(k.client, cfg.resync, informers.WithNamespace(ns),
			informers.WithTransform(placement.TrimPod),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = placement.PodSelector }),
		).Core().V1().Pods().Informer()
	})
	nodesFactory := informers.NewSharedInformerFactoryWithOptions(k.client, cfg.resync, informers.WithTransform(placement.TrimNode))
	nodes := nodesFactory.Core().V1().Nodes().Informer()
	where, err := placement.NewSource(tenantSets.Informer(), pods, nodes, func(key string) {
		// Both are built below, before anything runs.
		w.binaries.PlacementChanged(key)
		w.updates.PlacementChanged(key)
	}, log)
	if err != nil {
		return err
	}
	var operatorCA mountsecret.CABundleSource
	if cert != nil {
		operatorCA = cert
	}
	// One reader of Secrets' data for every controller: each version is
	// fetched once, whoever asks, and only what ObjectStores read is kept.
	secretData := mountsecret.NewSecretReader(secrets.GetIndexer(), k.client)
	if err := secretData.Track(stores, apiv1.SecretIndex((*apiv1.ObjectStore).SecretsRead)); err != nil {
		return err
	}
	w.mount, err = mountsecret.New(mountsecret.Config{
		Kube: k.client, Dynamic: k.dynamic,
		Secrets: secrets, Reader: secretData, StatefulSets: tenantSets, ObjectStores: stores,
		OperatorCA: operatorCA, Recorder: recorder, Log: log, Metrics: mountsecret.NewMetrics(reg), Registerer: reg,
		Workers: cfg.mountWorkers,
	})
	if err != nil {
		return err
	}
	w.binaries, err = binsource.NewController(binsource.ControllerConfig{
		Secrets: secretData, SecretsSynced: secrets.HasSynced,
		Dynamic: k.dynamic, ObjectStores: stores, Fetcher: fetcher, Keep: cfg.storeKeep, Grace: cfg.storeGrace,
		Recorder: recorder, Remedy: binaryRemedy, Log: log, Registerer: reg, Workers: cfg.binaryWorkers,
		UpdateURL: cfg.podUpdateURL(), URLKey: urlKey, Platforms: where.Platforms, PlatformsSynced: where.HasSynced,
		// The updater waits for the store; it is built next, before
		// anything runs.
		Resolved: func(key string) { w.updates.Resolved(key) },
	})
	if err != nil {
		return err
	}
	var serving updates.ServingCertificate
	if cert != nil {
		serving = cert
	}
	w.updates, err = updates.New(updates.Config{
		Kube: k.client, Dynamic: k.dynamic, ObjectStores: stores, Binaries: w.binaries, Store: store, Serving: serving,
		Platforms: where.Platforms, PlatformsSynced: where.HasSynced,
		Secrets: secretData, SecretsSynced: secrets.HasSynced,
		StatefulSets: tenantSets.Lister(), SetsSynced: tenantSets.Informer().HasSynced,
		UpdateURL: cfg.podUpdateURL(), ClusterDomain: cfg.clusterDomain, AllowedEndpoints: cfg.allowedEndpoints, Timeout: cfg.updateTimeout,
		Workers: cfg.updateWorkers, CallsPerNamespace: cfg.updateCallsNS,
		// An update in flight is looked at every 2 s; a tenant whose admin
		// API does not answer yet at most once per resync.
		Poll: 2 * time.Second, MaxPoll: cfg.resync,
		Recorder: recorder, Remedy: updateRemedy, Registerer: reg, Log: log,
	})
	if err != nil {
		return err
	}
	checks.Add("binaries", w.binaries.Ready)
	reg.MustRegister(objstatus.NewConditionCollector(stores.GetIndexer()))

	identity, err := replicaIdentity()
	if err != nil {
		return err
	}
	keeper, err := claim.New(claim.Config{
		Client: k.client, Namespace: cfg.namespace, Install: cfg.serviceName, Namespaces: cfg.watchNamespaces,
		Identity: identity, Duration: claimDuration, Interval: claimInterval, Registerer: reg, Log: log,
	})
	if err != nil {
		return err
	}
	checks.Add("namespace-claim", keeper.Ready)
	g.Go(func() error { return keeper.Run(ctx) })
	// Nothing watches or acts before this install holds its namespaces: an
	// install whose namespaces another one claimed first starts nothing
	// (docs/install.md, several installs), and a leadership term ends when
	// the claim stops being held.
	g.Go(func() error {
		defer broadcaster.Shutdown()
		if err := keeper.WaitHeld(ctx); err != nil {
			return nil
		}
		k.namespace.Start(ctx.Done())
		go tenantSets.informer.Run(ctx.Done())
		go pods.Run(ctx.Done())
		nodesFactory.Start(ctx.Done())
		go stores.Run(ctx.Done())
		go secrets.Run(ctx.Done())
		g.Go(func() error { return pool.Run(ctx) })
		g.Go(func() error { return w.binaries.Run(ctx) })
		g.Go(func() error { return w.mount.Run(ctx) })
		if w.issuer != nil {
			g.Go(func() error { return w.issuer.Run(ctx) })
		}
		g.Go(func() error { return w.updates.Run(ctx) })
		var leading atomic.Bool
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "objectstore_operator_leader",
			Help: "1 while this replica leads (writes, files CSRs, calls MinIO), else 0.",
		}, func() float64 {
			if leading.Load() {
				return 1
			}
			return 0
		}))
		return runAsLeader(ctx, cfg, k.client, identity, log, func(ctx context.Context) error {
			leading.Store(true)
			defer leading.Store(false)
			return keeper.WhileHeld(ctx, w.term)
		})
	})
	return nil
}

func newIssuer(ctx context.Context, cfg config, k *kube, log zerolog.Logger, metrics *autocert.Metrics) (*autocert.Issuer, error) {
	log.Info().Msg("Upgrade server Autocert is enabled, starting certificate setup")
	signer := cfg.signerName
	if signer == "" {
		signer = autocert.DetectSigner(ctx, k.client, log)
	}
	return autocert.NewIssuer(autocert.IssuerConfig{
		Client: k.client, Secrets: k.namespace.Core().V1().Secrets(),
		Namespace: cfg.namespace, SecretName: cfg.autocertSecret,
		DNSNames: cfg.dnsNames(), IPAddresses: cfg.ipAddresses(), SignerName: signer, Approve: cfg.approve,
		Timeout: cfg.csrTimeout, Expiration: cfg.expiration, RenewBefore: cfg.renewBefore,
		ServingCASecret: cfg.servingCASecret, ClusterCA: clusterCA(k.rest),
		Validator: autocert.Validator{DNSName: cfg.dnsNames()[0]}, Remedy: certRemedy(cfg.autocertSecret), Metrics: metrics, Log: log,
	})
}

// term lets the leader's work act for one leadership term.
func (w *leaderWork) term(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	if w.issuer != nil {
		g.Go(func() error { return w.issuer.Lead(ctx) })
	}
	g.Go(func() error { return w.mount.Lead(ctx) })
	g.Go(func() error { return w.binaries.Lead(ctx) })
	g.Go(func() error { return w.updates.Lead(ctx) })
	return g.Wait()
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
