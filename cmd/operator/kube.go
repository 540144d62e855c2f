package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
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
	"github.com/object-store-operator/operator/internal/podaddr"
	"github.com/object-store-operator/operator/internal/registryguard"
	"github.com/object-store-operator/operator/internal/secretcache"
	"github.com/object-store-operator/operator/internal/tenant"
	"github.com/object-store-operator/operator/mountsecret"
	"github.com/object-store-operator/operator/placement"
	"github.com/object-store-operator/operator/rollout"
	objstatus "github.com/object-store-operator/operator/status"
	"github.com/object-store-operator/operator/trust"
	"github.com/object-store-operator/operator/trustbundle"
	"github.com/object-store-operator/operator/updates"
	"github.com/object-store-operator/operator/upgradeserver"
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

// leaderWork is the controllers, built once: each says whether it needs
// leadership (issue certificates in autocert mode, keep mount Secrets,
// report binary conditions, drive updates, publish the bundle) or runs on
// every replica (fill the store), and one Manager runs them so
// (docs/development.md, who acts).
type leaderWork struct {
	issuer   *autocert.Issuer
	binaries *binsource.Controller
	mount    *mountsecret.Controller
	updates  *updates.Controller
	rollout  *rollout.Controller
	// bundle is nil when there is no CA to publish or publishing is off.
	bundle *trustbundle.Publisher
}

// parts is what the Kubernetes parts are built from, filled once by run:
// the configuration (cmd/operator's settings table, the one place a
// default is declared), the clients, and what they share with the rest of
// the process.
type parts struct {
	cfg         config
	k           *kube
	cert        *autocert.Current // nil: plain HTTP
	store       *binstore.Store
	log         zerolog.Logger
	reg         prometheus.Registerer
	certMetrics *autocert.Metrics
	checks      *health.Checks
}

// startKubernetesParts builds the parts that talk to Kubernetes and
// starts, on every replica, the trust pool and the controllers (every
// replica fills its own store), and the leader's work under leader
// election. It returns who the upgrade server's clients are, read from
// the same informers.
func startKubernetesParts(ctx context.Context, g *errgroup.Group, p parts) (upgradeserver.Clients, error) {
	pool, err := p.trustPool()
	if err != nil {
		return nil, err
	}
	urlKey, err := loadURLKey(ctx, p.k.client, p.cfg.namespace)
	if err != nil {
		return nil, err
	}
	identity, err := replicaIdentity()
	if err != nil {
		return nil, err
	}
	mgr := controller.NewManager(leaderElector(p.cfg, p.k.client, identity, p.log), p.log)
	w := &leaderWork{}
	if p.cfg.mode() == modeAutocert {
		if w.issuer, err = newIssuer(ctx, p.cfg, p.k, p.log, p.certMetrics); err != nil {
			return nil, err
		}
	}
	fetcher, err := p.fetcher(pool)
	if err != nil {
		return nil, err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: p.k.client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "object-store-operator"})
	inf, err := p.informers()
	if err != nil {
		return nil, err
	}
	// Each controller that reads placement registers its own handler on
	// it; controllers tell each other nothing but through the
	// ObjectStore's status (docs/development.md).
	where, err := placement.NewSource(inf.sets.Informer(), inf.pods, inf.nodes, p.log)
	if err != nil {
		return nil, err
	}
	// One reader of Secrets' data for every controller: each version is
	// fetched once, whoever asks.
	secretData := mountsecret.NewSecretReader(inf.secrets.GetIndexer(), p.k.client,
		secretcache.Limits{PerTenant: p.cfg.secretCacheNSMaxBytes, Total: p.cfg.secretCacheMaxBytes, TenantOf: inf.tenants.Of})
	// Only what ObjectStores read is kept.
	if err := secretData.Track(inf.stores, apiv1.SecretIndex((*apiv1.ObjectStore).SecretsRead)); err != nil {
		return nil, err
	}
	operatorCA := certificateAs[mountsecret.CABundleSource](p.cert)
	if p.cert != nil && p.cfg.trustBundle {
		// The certificate signals one reader; both consumers get their own
		// view.
		views := fanOutChanges(ctx, p.cert, 2)
		operatorCA = views[0]
		if w.bundle, err = p.trustBundle(views[1]); err != nil {
			return nil, err
		}
	}
	if w.mount, err = p.mountSecret(inf, secretData, operatorCA, recorder); err != nil {
		return nil, err
	}
	if w.binaries, err = p.binarySource(inf, fetcher, where, secretData, urlKey, recorder, mgr.Leading); err != nil {
		return nil, err
	}
	if w.updates, err = p.updater(inf, where, secretData, recorder); err != nil {
		return nil, err
	}
	if w.rollout, err = p.rollout(inf, w.updates, recorder); err != nil {
		return nil, err
	}
	p.checks.Add("binaries", w.binaries.Ready)
	p.reg.MustRegister(objstatus.NewConditionCollector(inf.stores.GetIndexer()))
	clients, err := podaddr.New(inf.pods, inf.stores)
	if err != nil {
		return nil, err
	}
	mgr.Add(w.runnables(pool)...)
	return clients, p.start(ctx, g, mgr, inf, broadcaster)
}

func (p parts) trustPool() (*trust.Pool, error) {
	return trust.New(trust.Config{
		Namespace: p.cfg.namespace, Secrets: p.k.namespace.Core().V1().Secrets(),
		ClusterCA: clusterCA(p.k.rest), Log: p.log, Registerer: p.reg,
		// The pool's transport is the registries' (and the mirror's):
		// http.DefaultTransport's dialer, pinned and guarded per pull.
		DialContext: registryguard.Dialer(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}),
	})
}

func (p parts) fetcher(pool *trust.Pool) (*binsource.Fetcher, error) {
	cfg := p.cfg
	return binsource.NewFetcher(binsource.FetcherConfig{
		Store: p.store, Transport: pool.Transport(), Platforms: cfg.platforms, MaxSize: cfg.maxBinarySize,
		MaxPullBytes: cfg.pullMaxBytes, PullTimeout: cfg.pullTimeout, InsecureRegistries: cfg.insecureRegs,
		MirrorURL: cfg.mirrorURL, Concurrency: cfg.pullConcurrency, PerNamespace: cfg.pullPerNS,
		StoreMaxBytes: cfg.storeMaxBytes, NamespaceMaxBytes: cfg.storeNSMaxBytes,
		Resolver: net.DefaultResolver, ResolveTimeout: registryResolveTimeout, Registerer: p.reg, Log: p.log,
	})
}

// registryResolveTimeout bounds looking up a registry's addresses (which
// pull slots it counts against); past it the name counts as itself.
const registryResolveTimeout = 2 * time.Second

// informerSet is one informer of each kind for the life of the process,
// over the watched namespaces (every namespace when none is set). What
// they hold is what the operator's memory grows with
// (docs/development.md): ObjectStores, the labelled StatefulSets, and
// Secrets as metadata only; for the platform of a tenant's binary, the
// StatefulSets' pods and the Nodes, trimmed to what placement reads.
type informerSet struct {
	stores, secrets, pods cache.SharedIndexInformer
	// namespaces' metadata, only when a label names tenants.
	namespaces   cache.SharedIndexInformer
	tenants      *tenant.Resolver
	sets         statefulSetInformer
	nodesFactory informers.SharedInformerFactory
	nodes        cache.SharedIndexInformer
}

func (p parts) informers() (informerSet, error) {
	cfg, k := p.cfg, p.k
	watched := cfg.watchNamespaces
	if len(watched) == 0 {
		watched = []string{metav1.NamespaceAll}
	}
	var s informerSet
	s.stores = newNamespacedInformers(watched, func(ns string) cache.SharedIndexInformer {
		return dynamicinformer.NewFilteredDynamicSharedInformerFactory(k.dynamic, cfg.resync, ns, nil).ForResource(apiv1.Resource).Informer()
	})
	if err := s.stores.SetTransform(controller.TrimForCache); err != nil {
		return s, err
	}
	s.secrets = newNamespacedInformers(watched, func(ns string) cache.SharedIndexInformer {
		return metadatainformer.NewFilteredMetadataInformer(k.metadata, corev1.SchemeGroupVersion.WithResource("secrets"),
			ns, cfg.resync, cache.Indexers{}, nil).Informer()
	})
	if err := s.secrets.SetTransform(secretcache.TrimMetadata); err != nil {
		return s, err
	}
	s.sets = statefulSetInformer{newNamespacedInformers(watched, func(ns string) cache.SharedIndexInformer {
		return informers.NewSharedInformerFactoryWithOptions(k.client, cfg.resync, informers.WithNamespace(ns),
			informers.WithTransform(controller.TrimForCache),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = apiv1.ObjectStoreLabel }),
		).Apps().V1().StatefulSets().Informer()
	})}
	// StatefulSet pods of the watched namespaces only (the label the
	// statefulset controller sets).
	s.pods = newNamespacedInformers(watched, func(ns string) cache.SharedIndexInformer {
		return informers.NewSharedInformerFactoryWithOptions(k.client, cfg.resync, informers.WithNamespace(ns),
			informers.WithTransform(placement.TrimPod),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = placement.PodSelector }),
		).Core().V1().Pods().Informer()
	})
	s.nodesFactory = informers.NewSharedInformerFactoryWithOptions(k.client, cfg.resync, informers.WithTransform(placement.TrimNode))
	s.nodes = s.nodesFactory.Core().V1().Nodes().Informer()
	var names cache.Indexer
	if cfg.tenantLabel != "" {
		// Every namespace's labels, as metadata: a tenant's namespaces
		// may be watched or not, and the label is all that is read.
		s.namespaces = metadatainformer.NewFilteredMetadataInformer(k.metadata, corev1.SchemeGroupVersion.WithResource("namespaces"),
			metav1.NamespaceAll, cfg.resync, cache.Indexers{}, nil).Informer()
		if err := s.namespaces.SetTransform(keepLabel(cfg.tenantLabel)); err != nil {
			return s, err
		}
		names = s.namespaces.GetIndexer()
		// Without list and watch on namespaces nothing starts (start waits
		// for the labels): say why, in the log and in /readyz, instead of
		// waiting silently.
		label := cfg.tenantLabel
		if err := s.namespaces.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			p.log.Error().Err(err).Str("label", label).Str("reason", "NamespacesUnreadable").
				Msg("cannot read the namespaces' tenant label; nothing starts until it can: grant list and watch on namespaces (the chart's ClusterRole does)")
		}); err != nil {
			return s, err
		}
		p.checks.Add("tenant-labels", func() error {
			if !s.namespaces.HasSynced() {
				return fmt.Errorf("the namespaces' %s label is not read yet (needs list and watch on namespaces)", label)
			}
			return nil
		})
	}
	s.tenants = tenant.New(cfg.tenantLabel, cfg.shareUnit, names)
	return s, nil
}

// keepLabel trims a Namespace's metadata to the one label read.
func keepLabel(label string) cache.TransformFunc {
	return func(obj any) (any, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			v, has := m.Labels[label]
			m.ManagedFields, m.Annotations, m.Labels = nil, nil, nil
			if has {
				m.Labels = map[string]string{label: v}
			}
		}
		return obj, nil
	}
}

// start runs the informers; with a tenant label, it returns once the
// namespaces' labels are read, so no share is counted per namespace for
// a tenant not seen yet.
func (s informerSet) start(stop <-chan struct{}) {
	if s.namespaces != nil {
		go s.namespaces.Run(stop)
		cache.WaitForCacheSync(stop, s.namespaces.HasSynced)
	}
	go s.sets.informer.Run(stop)
	go s.pods.Run(stop)
	s.nodesFactory.Start(stop)
	go s.stores.Run(stop)
	go s.secrets.Run(stop)
}

func (p parts) trustBundle(ca caView) (*trustbundle.Publisher, error) {
	return trustbundle.New(trustbundle.Config{
		Kube: p.k.client, Dynamic: p.k.dynamic, Namespace: p.cfg.namespace, Owner: p.cfg.trustBundleOwner,
		Source: ca, Changed: ca.Changed(), Resync: p.cfg.resync, Log: p.log, Registerer: p.reg,
	})
}

func (p parts) mountSecret(inf informerSet, secretData *secretcache.Reader, operatorCA mountsecret.CABundleSource,
	recorder record.EventRecorder) (*mountsecret.Controller, error) {
	return mountsecret.New(mountsecret.Config{
		Kube: p.k.client, Dynamic: p.k.dynamic,
		Secrets: inf.secrets, Reader: secretData, StatefulSets: inf.sets, ObjectStores: inf.stores,
		OperatorCA: operatorCA, Recorder: recorder, Log: p.log, Reasons: p.cfg.why.mount,
		Metrics: mountsecret.NewMetrics(p.reg), Registerer: p.reg, Workers: p.cfg.mountWorkers, SyncsPerTenant: p.cfg.syncsPerTenant, UnitOf: inf.tenants.Unit,
		MaxConcurrentRestarts: p.cfg.maxRestarts, RestartTimeout: p.cfg.restartTimeout,
	})
}

func (p parts) binarySource(inf informerSet, fetcher *binsource.Fetcher, where *placement.Source, secretData *secretcache.Reader,
	urlKey []byte, recorder record.EventRecorder, leading func() context.Context) (*binsource.Controller, error) {
	cfg := p.cfg
	return binsource.NewController(binsource.ControllerConfig{
		Secrets: secretData, SecretsSynced: inf.secrets.HasSynced, Dynamic: p.k.dynamic, ObjectStores: inf.stores, Fetcher: fetcher, Keep: cfg.storeKeep, Grace: cfg.storeGrace,
		Recorder: recorder, Reasons: cfg.why.binaries, Log: p.log, Registerer: p.reg, Workers: cfg.binaryWorkers, SyncsPerTenant: cfg.syncsPerTenant, UnitOf: inf.tenants.Unit,
		UpdateURL: cfg.podUpdateURL(), URLKey: urlKey, Platforms: where.Platforms, PlatformsSynced: where.HasSynced,
		OnPlacementChange: where.OnChange, Leading: leading,
	})
}

// updatePoll is how often an update in flight is looked at; a tenant
// whose admin API does not answer yet is looked at at most once per
// resync.
const updatePoll = 2 * time.Second

func (p parts) updater(inf informerSet, where *placement.Source, secretData *secretcache.Reader,
	recorder record.EventRecorder) (*updates.Controller, error) {
	cfg := p.cfg
	return updates.New(updates.Config{
		UpdateURL: cfg.podUpdateURL(),
		Kube:      p.k.client, Dynamic: p.k.dynamic, ObjectStores: inf.stores,
		Serving: certificateAs[updates.ServingCertificate](p.cert), Platforms: where.Platforms, PlatformsSynced: where.HasSynced,
		OnPlacementChange: where.OnChange, Secrets: secretData, SecretsSynced: inf.secrets.HasSynced, SecretEvents: inf.secrets,
		StatefulSets: inf.sets.Lister(), SetsSynced: inf.sets.Informer().HasSynced,
		ClusterDomain: cfg.clusterDomain, AllowedEndpoints: cfg.allowedEndpoints, Timeout: cfg.updateTimeout, Fallback: cfg.updateFallback,
		Workers: cfg.updateWorkers, SyncsPerTenant: cfg.syncsPerTenant, UnitOf: inf.tenants.Unit, CallsPerNamespace: cfg.updateCallsNS, Poll: updatePoll, MaxPoll: cfg.resync,
		MaxInFlight: cfg.maxUpdates, FailureBudget: cfg.failureBudget, HaltNamespace: cfg.namespace,
		Recorder: recorder, Reasons: cfg.why.updates, Registerer: p.reg, Log: p.log,
	})
}

// quorumPoll is how soon a tenant whose MinIO said no node may go down
// is asked again.
const quorumPoll = 5 * time.Second

func (p parts) rollout(inf informerSet, u *updates.Controller, recorder record.EventRecorder) (*rollout.Controller, error) {
	return rollout.New(rollout.Config{
		Kube: p.k.client, Dynamic: p.k.dynamic, StatefulSets: inf.sets.Informer(), Pods: inf.pods, ObjectStores: inf.stores,
		Health: maintenanceCheck{u}, MaxUnavailable: p.cfg.restartMaxUnavailable, PodTimeout: p.cfg.restartPodTimeout, QuorumPoll: quorumPoll,
		Recorder: recorder, Reasons: p.cfg.why.rollout, Log: p.log, Registerer: p.reg, Workers: p.cfg.mountWorkers,
		SyncsPerTenant: p.cfg.syncsPerTenant, UnitOf: inf.tenants.Unit,
	})
}

// maintenanceCheck asks a tenant's MinIO through the updater's endpoint
// rules, in the words the rollout reads: MinIO's "not now" is
// rollout.ErrNotNow.
type maintenanceCheck struct{ u *updates.Controller }

func (m maintenanceCheck) MayTakeDown(ctx context.Context, store *apiv1.ObjectStore, pod string) (string, error) {
	asked, err := m.u.MayTakeDown(ctx, store, pod)
	if errors.Is(err, updates.ErrNotNow) {
		return asked, notNow{err}
	}
	return asked, err
}

type notNow struct{ error }

func (notNow) Is(target error) bool { return target == rollout.ErrNotNow }
func (n notNow) Unwrap() error      { return n.error }

// start runs the namespace claim's keeper and, once this install holds
// its namespaces, the informers and the Manager: the parts that need no
// leadership on every replica, the leader's work during leadership terms.
// An install that loses its namespaces stops (internal/claim).
func (p parts) start(ctx context.Context, g *errgroup.Group, mgr *controller.Manager, inf informerSet, broadcaster record.EventBroadcaster) error {
	keeper, err := claim.New(claim.Config{
		Client: p.k.dynamic, Namespace: p.cfg.namespace, Install: p.cfg.serviceName, Namespaces: p.cfg.watchNamespaces,
		Registerer: p.reg, Log: p.log,
	})
	if err != nil {
		return err
	}
	p.checks.Add("namespace-claim", keeper.Ready)
	own := makeOwnClaim(ctx, p.k.dynamic, p.cfg, p.log)
	g.Go(func() error {
		defer own.remove(ctx)
		return keeper.Run(ctx)
	})
	p.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "objectstore_operator_leader",
		Help: "1 while this replica leads (writes, files CSRs, calls MinIO), else 0.",
	}, func() float64 {
		if mgr.Leading() != nil {
			return 1
		}
		return 0
	}))
	// Nothing watches or acts before this install holds its namespaces: an
	// install whose namespaces another one claimed first starts nothing
	// (docs/install.md, several installs).
	g.Go(func() error {
		defer broadcaster.Shutdown()
		return keeper.WhileHeld(ctx, func(ctx context.Context) error {
			p.k.namespace.Start(ctx.Done())
			inf.start(ctx.Done())
			return mgr.Start(ctx)
		})
	})
	return nil
}

// certificateAs is the serving certificate as the interface a part takes:
// nil, not a typed nil, in plain-HTTP mode, so the part's own nil check
// holds.
func certificateAs[I any](cert *autocert.Current) I {
	var i I
	if cert != nil {
		i = any(cert).(I)
	}
	return i
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
		Validator: autocert.Validator{DNSName: cfg.dnsNames()[0]}, Reasons: cfg.why.certs, Metrics: metrics, Log: log,
	})
}

// runnables are the controllers and the trust pool, for the Manager.
func (w *leaderWork) runnables(pool *trust.Pool) []controller.Runnable {
	rs := []controller.Runnable{
		// The trust pool serves every replica's pulls.
		controller.RunnableFunc{Fn: pool.Run},
		w.binaries, w.binaries.Reporter(), w.mount, w.updates, w.rollout,
	}
	if w.issuer != nil {
		rs = append(rs, w.issuer)
	}
	if w.bundle != nil {
		rs = append(rs, w.bundle)
	}
	return rs
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

// caView is the serving certificate with a change signal of its own.
type caView struct {
	*autocert.Current
	changed chan struct{}
}

// Changed is signalled (buffered, never blocking) after each swap.
func (v caView) Changed() <-chan struct{} { return v.changed }

// fanOutChanges gives n consumers of cert's CA bundle each a view with
// its own change signal: cert.Changed() has room for one reader only.
func fanOutChanges(ctx context.Context, cert *autocert.Current, n int) []caView {
	views := make([]caView, n)
	for i := range views {
		views[i] = caView{Current: cert, changed: make(chan struct{}, 1)}
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-cert.Changed():
				for _, v := range views {
					select {
					case v.changed <- struct{}{}:
					default:
					}
				}
			}
		}
	}()
	return views
}
