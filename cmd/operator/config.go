package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"aead.dev/minisign"
	"github.com/minio/pkg/v3/env"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/binsource"
	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/internal/tenant"
	"github.com/object-store-operator/operator/updates"
	"github.com/object-store-operator/operator/upgradeserver"
)

// minioReleaseKey is the key MinIO signs its releases with, the one its
// update client trusts when MINIO_UPDATE_MINISIGN_PUBKEY is unset.
const minioReleaseKey = "RWTx5Zr1tiHQLwG9keckT0c45M3AGeHD6IvimQHpyRywVWGbP1aVSGav"

// setting is one configuration value, declared once: its flag, the
// environment variable behind the flag's default, the built-in default,
// the help line, and how a value is parsed into config. Flags win over
// env vars, env vars over defaults. docs/configuration.md and the chart's
// values comments list every one (a test keeps them honest).
type setting struct {
	flag, env, def, help string
	parse                func(string) error
}

type config struct {
	upgradeAddress string
	updateDir      string
	metricsAddress string
	tlsCertFile    string
	tlsKeyFile     string
	autoCertOff    bool
	customSecret   string
	shutdownGrace  time.Duration
	logLevel       zerolog.Level
	accessLog      bool

	kubeconfig                                 string
	namespace                                  string
	serviceName                                string
	clusterDomain                              string
	signerName                                 string
	approve                                    bool
	csrTimeout                                 time.Duration
	expiration                                 time.Duration
	renewBefore                                time.Duration
	autocertSecret                             string
	servingCASecret                            string
	leaderElection                             bool
	leaseDuration                              time.Duration
	renewDeadline                              time.Duration
	retryPeriod                                time.Duration
	resync                                     time.Duration
	qps                                        float32
	burst                                      int
	mirrorURL                                  string
	storeKeep                                  int
	storeMaxBytes                              int64
	storeNSMaxBytes                            int64
	secretCacheMaxBytes, secretCacheNSMaxBytes int64
	storeGrace                                 time.Duration
	pullConcurrency                            int
	pullPerNS                                  int
	maxBinarySize                              int64
	platforms                                  []binsource.Platform
	minisignKeys                               []minisign.PublicKey
	signingKey                                 string
	insecureRegs                               []string
	pullTimeout                                time.Duration
	pullMaxBytes                               int64
	updateURL                                  string
	updateTimeout                              time.Duration
	updateFallback                             string
	allowedEndpoints                           updates.EndpointPolicy
	updateWorkers                              int
	mountWorkers                               int
	syncsPerTenant                             int
	tenantLabel                                string
	shareUnit                                  tenant.Units
	maxRestarts                                int
	restartTimeout                             time.Duration
	restartMaxUnavailable                      int
	restartPodTimeout                          time.Duration
	binaryWorkers                              int
	updateCallsNS                              int
	maxUpdates                                 int
	failureBudget                              int
	maxDownloads                               int
	maxConns                                   int
	clientDownloads                            int
	clientConns                                int
	minDownloadRate                            int64
	trustBundle                                bool
	trustBundleOwner                           string
	// watchNamespaces are the namespaces whose ObjectStores this install
	// reconciles, sorted; empty means every namespace.
	watchNamespaces []string
	// why is every package's reasons, remedies spelled in these settings.
	why reasonSets
}

// settings is the one table of settings, the one place a default is
// declared. It is long, so it is written by topic below; the parts are
// concatenated in the order the settings are read and errors reported.
func (c *config) settings() []setting {
	return slices.Concat(
		c.serverSettings(),
		c.clusterSettings(),
		c.certificateSettings(),
		c.apiSettings(),
		c.storeSettings(),
		c.controllerSettings(),
	)
}

// serverSettings are the upgrade server's: where it listens, what it
// serves from, its limits on clients, and its logs.
func (c *config) serverSettings() []setting {
	return []setting{
		{"upgrade-address", "OPERATOR_UPGRADE_ADDRESS", ":4221", "address of the TLS upgrade server", listenAddress(&c.upgradeAddress)},
		{"update-dir", "OPERATOR_UPDATE_DIR", "/var/lib/object-store-operator/updates", "directory of MinIO binaries to serve", nonEmpty(&c.updateDir)},
		{"metrics-address", "OPERATOR_METRICS_ADDRESS", ":8080", "plain-HTTP address for /healthz, /readyz and /metrics", text(&c.metricsAddress)},
		{"tls-cert-file", "OPERATOR_TLS_CERT_FILE", "", "serve the certificate (chain) in this PEM file; reloaded when it changes", text(&c.tlsCertFile)},
		{"tls-key-file", "OPERATOR_TLS_KEY_FILE", "", "private key for --tls-cert-file", text(&c.tlsKeyFile)},
		{"auto-cert-disabled", "OPERATOR_AUTO_CERT_DISABLED", "off", "on: do not request a certificate from the Kubernetes CSR API", onOff(&c.autoCertOff)},
		{"custom-tls-secret-name", "OPERATOR_CUSTOM_TLS_SECRET_NAME", "", "Secret in the operator namespace with the serving certificate (when autocert is disabled)", text(&c.customSecret)},
		{"max-downloads", "OPERATOR_MAX_DOWNLOADS", "64", "binary downloads served at once; more are answered 503 with Retry-After (each holds a 256 KiB buffer)", atLeast(&c.maxDownloads, 1)},
		{"max-connections", "OPERATOR_MAX_CONNECTIONS", "4096", "connections to the upgrade server open at once; more are closed on accept (about 64 KiB each); a quarter is kept for the watched namespaces' tenant pods", atLeast(&c.maxConns, 1)},
		{"max-downloads-per-client", "OPERATOR_MAX_DOWNLOADS_PER_CLIENT", "4", "binary downloads one client runs at once: a watched namespace's tenant pods together, any other source address alone; a pod whose ObjectStore is updating to that binary is held to this alone, not to OPERATOR_MAX_DOWNLOADS", atLeast(&c.clientDownloads, 1)},
		{"max-connections-per-client", "OPERATOR_MAX_CONNECTIONS_PER_CLIENT", "64", "connections to the upgrade server, idle or not, one client holds at once (a watched namespace's tenant pods together, any other source address alone); more are closed on accept", atLeast(&c.clientConns, 1)},
		{"min-download-rate", "OPERATOR_MIN_DOWNLOAD_RATE", "256Ki", "bytes a second a binary download must average over each minute to keep its slot (Kubernetes quantity); a download that makes no progress for a minute is dropped whatever the rate", size(&c.minDownloadRate)},
		{"shutdown-grace", "OPERATOR_SHUTDOWN_GRACE", "30s", "how long running downloads may finish after a shutdown signal", duration(&c.shutdownGrace, 0)},
		{"log-level", "OPERATOR_LOG_LEVEL", "info", "log level: debug, info, warn or error", logLevel(&c.logLevel)},
		{"access-log", "OPERATOR_ACCESS_LOG", "on", "on: one info line per upgrade-server request (method, path, status, bytes, duration, remote); off: none, whatever the log level (the request metrics count every request either way)", onOff(&c.accessLog)},
	}
}

// clusterSettings say where the operator runs: its cluster, namespace
// and Service.
func (c *config) clusterSettings() []setting {
	return []setting{
		{"kubeconfig", "KUBECONFIG", "", "kubeconfig file; empty means the in-cluster service account", text(&c.kubeconfig)},
		{"namespace", "OPERATOR_NAMESPACE", serviceAccountNamespace(), "the operator's namespace (downward API); default: the service account's", text(&c.namespace)},
		{"service-name", "OPERATOR_SERVICE_NAME", "object-store-operator", "name of the Service in front of the upgrade server", text(&c.serviceName)},
		{"cluster-domain", "CLUSTER_DOMAIN", "cluster.local", "cluster DNS domain, for the certificate's SANs", text(&c.clusterDomain)},
	}
}

// certificateSettings are the serving certificate's: autocert's CSR and
// Secret, and the CA pods must trust.
func (c *config) certificateSettings() []setting {
	return []setting{
		{"csr-signer-name", "OPERATOR_CSR_SIGNER_NAME", "", "signer for the autocert CSR; empty: kubernetes.io/kubelet-serving, or beta.eks.amazonaws.com/app-serving on EKS", text(&c.signerName)},
		{"autocert-approve", "OPERATOR_AUTOCERT_APPROVE", "on", "on: the operator approves its own CSR; off: an admin or policy engine approves", onOff(&c.approve)},
		{"autocert-timeout", "OPERATOR_AUTOCERT_TIMEOUT", "5m", "how long one CSR may wait for approval and signing before it is retried", duration(&c.csrTimeout, time.Second)},
		{"autocert-expiration", "OPERATOR_AUTOCERT_EXPIRATION", "8760h", "requested certificate lifetime (spec.expirationSeconds, at least 10m; the signer may shorten it)", duration(&c.expiration, 10*time.Minute)},
		{"autocert-renew-before", "OPERATOR_AUTOCERT_RENEW_BEFORE", "", "renew this long before expiry; empty: a third of the certificate's lifetime", optional(duration(&c.renewBefore, time.Second))},
		{"autocert-secret-name", "OPERATOR_AUTOCERT_SECRET_NAME", "object-store-operator-tls", "Secret in the operator namespace where autocert stores tls.crt, tls.key and ca.crt", text(&c.autocertSecret)},
		{"serving-ca-secret", "OPERATOR_SERVING_CA_SECRET", "", "Secret in the operator namespace whose ca.crt is the CA pods must trust for the upgrade server (overrides what the operator works out)", text(&c.servingCASecret)},
	}
}

// apiSettings are leader election's, the namespaces watched, and how
// hard the operator leans on the Kubernetes API.
func (c *config) apiSettings() []setting {
	return []setting{
		{"leader-election", "OPERATOR_LEADER_ELECTION", "on", "on: replicas elect a leader (Lease object-store-operator) that files CSRs and writes Secrets", onOff(&c.leaderElection)},
		{"lease-duration", "OPERATOR_LEASE_DURATION", "15s", "leader election: how long a lease is valid", duration(&c.leaseDuration, time.Second)},
		{"lease-renew-deadline", "OPERATOR_LEASE_RENEW_DEADLINE", "10s", "leader election: how long the leader tries to renew before giving up", duration(&c.renewDeadline, time.Second)},
		{"lease-retry-period", "OPERATOR_LEASE_RETRY_PERIOD", "2s", "leader election: how often candidates retry", duration(&c.retryPeriod, 100*time.Millisecond)},
		{"watch-namespaces", "OPERATOR_WATCH_NAMESPACES", "", "comma-separated namespaces whose ObjectStores this install reconciles (informers, writes and its claim); empty: every namespace", namespaces(&c.watchNamespaces)},
		{"resync-period", "OPERATOR_RESYNC_PERIOD", "10m", "how often every watched object is re-checked even without events", duration(&c.resync, time.Second)},
		{"kube-api-qps", "OPERATOR_KUBE_API_QPS", "300", "sustained requests per second to the Kubernetes API (a shared CA rotates into every generated Secret at about this rate)", positive(&c.qps)},
		{"kube-api-burst", "OPERATOR_KUBE_API_BURST", "600", "burst of requests to the Kubernetes API", atLeast(&c.burst, 1)},
	}
}

// storeSettings are the binary store's and those of the pulls that fill
// it: its bounds, platforms, signature keys and registries.
func (c *config) storeSettings() []setting {
	return []setting{
		{"release-mirror-url", "OPERATOR_RELEASE_MIRROR_URL", "", "mirror of MinIO release directories (<url>/<os>-<arch>/minio.<RELEASE>) for releases no image provides", optional(httpURL(&c.mirrorURL, ""))},
		{"store-keep", "OPERATOR_STORE_KEEP", "3", "unreferenced releases are removed once this many newer ones exist (and the grace passed)", atLeast(&c.storeKeep, 0)},
		{"store-max-bytes", "OPERATOR_STORE_MAX_BYTES", "3Gi", "most distinct binary bytes the store holds; a pull past it is StoreFull (Kubernetes quantity; keep it under the store volume's size, leaving room for binaries being pulled)", size(&c.storeMaxBytes)},
		{"store-namespace-max-bytes", "OPERATOR_STORE_NAMESPACE_MAX_BYTES", "1Gi", "most distinct binary bytes one unit (namespace, tenant or ObjectStore, see OPERATOR_SHARE_UNIT) may have the store hold: what its ObjectStores reference and what its pulls landed until it is removed; a pull past it is StoreFull (Kubernetes quantity)", size(&c.storeNSMaxBytes)},
		{"store-unreferenced-grace", "OPERATOR_STORE_UNREFERENCED_GRACE", "10m", "how long a binary no ObjectStore references stays before it is removed, so an image flipped back is not pulled again", duration(&c.storeGrace, 0)},
		{"pull-concurrency", "OPERATOR_PULL_CONCURRENCY", "2", "image pulls and mirror downloads running at once; one registry server gets at most half of them", atLeast(&c.pullConcurrency, 1)},
		{"pull-slots-per-namespace", "OPERATOR_PULL_SLOTS_PER_NAMESPACE", "1", "pulls one unit (namespace, tenant or ObjectStore) runs at once; free slots go to the units in turn", atLeast(&c.pullPerNS, 1)},
		{"max-binary-size", "OPERATOR_MAX_BINARY_SIZE", "1Gi", "largest binary accepted from an image or mirror (Kubernetes quantity)", size(&c.maxBinarySize)},
		{"platforms", "OPERATOR_PLATFORMS", "linux/amd64,linux/arm64", "platforms fetched into <os>-<arch>/ directories", func(v string) (err error) {
			c.platforms, err = binsource.ParsePlatforms(v)
			return err
		}},
		{"minisign-pubkeys", "OPERATOR_MINISIGN_PUBKEYS", minioReleaseKey, "comma-separated minisign public keys a binary's .minisig must verify against (default: MinIO's release key)", func(v string) (err error) {
			c.minisignKeys, err = binstore.ParsePublicKeys(v)
			return err
		}},
		{"signing-key-secret", "OPERATOR_SIGNING_KEY_SECRET", "", "Secret in the operator namespace with a platform minisign secret key (minisign.key, optional password) that signs binaries from verified images that ship none", text(&c.signingKey)},
		{"insecure-registries", "OPERATOR_INSECURE_REGISTRIES", "", "comma-separated registry hosts (host[:port]) reached over plain HTTP; every other registry over HTTPS only", list(&c.insecureRegs)},
		{"pull-timeout", "OPERATOR_PULL_TIMEOUT", "10m", "deadline of one image pull or mirror download", duration(&c.pullTimeout, time.Second)},
		{"pull-max-bytes", "OPERATOR_PULL_MAX_BYTES", "4Gi", "most bytes one pull reads from a registry, compressed and uncompressed alike (Kubernetes quantity)", size(&c.pullMaxBytes)},
	}
}

// controllerSettings are the controllers': in-place updates, certificate
// restarts, their workers and bounds, and the ClusterTrustBundle.
func (c *config) controllerSettings() []setting {
	return []setting{
		{"update-url", "OPERATOR_UPDATE_URL", "", "base URL (up to /webhook/v1/update) MinIO pods fetch in-place updates from; empty: https://<service>.<namespace>.svc.<cluster-domain>:<upgrade port>/webhook/v1/update", optional(httpURL(&c.updateURL, upgradeserver.UpdatePath))},
		{"update-timeout", "OPERATOR_UPDATE_TIMEOUT", "10m", "how long an in-place update may take, from the call until every node runs the release, before the operator rolls the StatefulSets instead", duration(&c.updateTimeout, time.Second)},
		{"update-fallback", "OPERATOR_UPDATE_FALLBACK", "Rolling", "what follows an in-place update that cannot be made or failed, for ObjectStores whose spec.updates.fallback is unset: Rolling (the StatefulSets get the image) or None (the update stops with a condition and its remedy; no StatefulSet changes)", func(v string) error {
			if v != apiv1.FallbackRolling && v != apiv1.FallbackNone {
				return fmt.Errorf("is neither %s nor %s", apiv1.FallbackRolling, apiv1.FallbackNone)
			}
			c.updateFallback = v
			return nil
		}},
		{"secret-cache-max-bytes", "OPERATOR_SECRET_CACHE_MAX_BYTES", "64Mi", "most data of referenced Secrets kept in memory in all; beyond it Secrets are read from the API at each sync (Kubernetes quantity)", size(&c.secretCacheMaxBytes)},
		{"secret-cache-namespace-max-bytes", "OPERATOR_SECRET_CACHE_NAMESPACE_MAX_BYTES", "16Mi", "most data of one namespace's referenced Secrets kept in memory (Kubernetes quantity)", size(&c.secretCacheNSMaxBytes)},
		{"tenant-label", "OPERATOR_TENANT_LABEL", "", "namespace label whose value names the tenant a namespace belongs to: its namespaces share one share of every bound (restart, pull and update slots, store bytes, Secret cache, workers, the failure budget); empty, or a namespace without it: each namespace is a tenant. Tenants cannot label namespaces", func(v string) error {
			if v != "" {
				if errs := validation.IsQualifiedName(v); len(errs) > 0 {
					return fmt.Errorf("is not a label key: %s", strings.Join(errs, "; "))
				}
			}
			c.tenantLabel = v
			return nil
		}},
		{"share-unit", "OPERATOR_SHARE_UNIT", "tenant", "what every share and budget counts: tenant (OPERATOR_TENANT_LABEL, else the namespace) or objectstore (each ObjectStore apart: a fleet one team runs in one namespace, where a release failing on every ObjectStore halts)", func(v string) (err error) {
			c.shareUnit, err = tenant.ParseUnits(v)
			return err
		}},
		{"syncs-per-tenant", "OPERATOR_SYNCS_PER_TENANT", "2", "ObjectStores of one unit (namespace, tenant or ObjectStore, see OPERATOR_SHARE_UNIT) each controller syncs at once, so one tenant's ObjectStores never hold every worker (and the memory each sync holds); 0: no bound beyond the workers", atLeast(&c.syncsPerTenant, 0)},
		{"mountsecret-workers", "OPERATOR_MOUNTSECRET_WORKERS", "8", "ObjectStores whose generated Secret is rebuilt at once, and whose pods the rollout looks at at once", atLeast(&c.mountWorkers, 1)},
		{"max-concurrent-restarts", "OPERATOR_MAX_CONCURRENT_RESTARTS", "10", "tenants whose pods restart for new certificates at once, each until its pods are ready again (0: no limit)", atLeast(&c.maxRestarts, 0)},
		{"restart-timeout", "OPERATOR_RESTART_TIMEOUT", "10m", "longest one tenant's certificate restart holds its slot: pods not ready by then let the next tenant restart", duration(&c.restartTimeout, time.Second)},
		{"restart-max-unavailable", "OPERATOR_RESTART_MAX_UNAVAILABLE", "1", "pods of one ObjectStore the operator takes down at once when it replaces them (new certificates, a rolling fallback), each serving one only when MinIO's maintenance check answers 200; an ObjectStore's spec.restarts.maxUnavailable overrides it", atLeast(&c.restartMaxUnavailable, 1)},
		{"restart-pod-timeout", "OPERATOR_RESTART_POD_TIMEOUT", "10m", "how long a pod the operator replaced has to become Ready; past it no other pod of that ObjectStore is taken down until it is (reason PodTimeout); spec.restarts.podTimeout overrides it", duration(&c.restartPodTimeout, time.Second)},
		{"binsource-workers", "OPERATOR_BINSOURCE_WORKERS", "4", "ObjectStores whose image the binary source resolves at once (pulls run beside them, see OPERATOR_PULL_CONCURRENCY)", atLeast(&c.binaryWorkers, 1)},
		{"update-workers", "OPERATOR_UPDATE_WORKERS", "4", "ObjectStores the in-place updater looks at at once (update calls run beside them)", atLeast(&c.updateWorkers, 1)},
		{"update-calls-per-namespace", "OPERATOR_UPDATE_CALLS_PER_NAMESPACE", "1", "in-place update calls one unit's ObjectStores may have running at once (a unit: the namespace, its tenant with OPERATOR_TENANT_LABEL, or each ObjectStore with OPERATOR_SHARE_UNIT=objectstore)", atLeast(&c.updateCallsNS, 1)},
		{"cluster-trust-bundle", "OPERATOR_CLUSTER_TRUST_BUNDLE", "on", "on: where the API serves ClusterTrustBundles, publish the CA pods must trust as aistor.min.io:object-store-operator:<namespace>; off: never", onOff(&c.trustBundle)},
		{"cluster-trust-bundle-owner", "OPERATOR_CLUSTER_TRUST_BUNDLE_OWNER", "", "ClusterRole that owns the ClusterTrustBundle, so the garbage collector removes it with that role (the chart sets its own); empty: no owner, remove it by hand", text(&c.trustBundleOwner)},
		{"max-concurrent-updates", "OPERATOR_MAX_CONCURRENT_UPDATES", "4", "in-place updates in flight across every tenant, from the recorded call until every node runs the release or the fallback; 0: no cap", atLeast(&c.maxUpdates, 0)},
		{"update-failure-budget", "OPERATOR_UPDATE_FAILURE_BUDGET", "3", "units (namespaces, tenants or ObjectStores, see OPERATOR_SHARE_UNIT) whose in-place update to one release may fail, with none succeeding, before updates to that release halt fleet-wide; 0: never halt; at most 64", func(v string) error {
			if err := atLeast(&c.failureBudget, 0)(v); err != nil {
				return err
			}
			if c.failureBudget > updates.MaxFailureBudget {
				return fmt.Errorf("is more than %d (the halt record keeps a failure of each namespace, within what a Lease holds)", updates.MaxFailureBudget)
			}
			return nil
		}},
		{"allowed-update-endpoints", "OPERATOR_ALLOWED_UPDATE_ENDPOINTS", "", "comma-separated CIDRs and host globs (10.0.0.0/8,*.minio.example.com) the operator may reach a tenant's admin API at, beyond the Services of the ObjectStore's own namespace; addresses only by CIDR, and loopback, link-local and metadata addresses only when a CIDR names them", func(v string) (err error) {
			c.allowedEndpoints, err = updates.ParseEndpointPolicy(v)
			return err
		}},
	}
}

// loadConfig reads flags from args, with defaults from the environment.
// Errors name what the user set (the flag, or the environment variable);
// unknown are the OPERATOR_* variables no setting reads: a typo, or a
// setting of another version.
func loadConfig(args []string, out io.Writer) (c config, unknown []string, err error) {
	settings := c.settings()
	fs := flag.NewFlagSet("object-store-operator", flag.ContinueOnError)
	fs.SetOutput(out)
	values := make([]*string, len(settings))
	known := map[string]bool{}
	for i, s := range settings {
		values[i] = fs.String(s.flag, env.Get(s.env, s.def), fmt.Sprintf("%s (env %s)", s.help, s.env))
		known[s.env] = true
	}
	if err := fs.Parse(args); err != nil {
		return config{}, nil, err
	}
	if fs.NArg() > 0 {
		return config{}, nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	flagSet := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { flagSet[f.Name] = true })
	// what names a setting as the user gave it.
	what := func(s setting) string {
		if flagSet[s.flag] {
			return "--" + s.flag
		}
		return s.env
	}
	byFlag := map[string]setting{}
	var errs []error
	for i, s := range settings {
		byFlag[s.flag] = s
		if err := s.parse(*values[i]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q %w", what(s), *values[i], err))
		}
	}
	if c.renewBefore >= c.expiration {
		errs = append(errs, fmt.Errorf("%s must be shorter than %s", what(byFlag["autocert-renew-before"]), what(byFlag["autocert-expiration"])))
	}
	if c.renewDeadline >= c.leaseDuration {
		errs = append(errs, fmt.Errorf("%s must be shorter than %s", what(byFlag["lease-renew-deadline"]), what(byFlag["lease-duration"])))
	}
	if (c.tlsCertFile == "") != (c.tlsKeyFile == "") {
		errs = append(errs, fmt.Errorf("%s and %s go together: set both or neither", what(byFlag["tls-cert-file"]), what(byFlag["tls-key-file"])))
	}
	var err2 error
	if c.why, err2 = c.reasons(); err2 != nil {
		errs = append(errs, err2)
	}
	for _, name := range env.List("OPERATOR_") {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	return c, unknown, errors.Join(errs...)
}

// Parsers of setting values; an error completes "<what>: <value> ...".

func text(dst *string) func(string) error {
	return func(v string) error { *dst = v; return nil }
}

func nonEmpty(dst *string) func(string) error {
	return func(v string) error {
		if v == "" {
			return errors.New("must not be empty")
		}
		*dst = v
		return nil
	}
}

// optional leaves the value at its zero when empty.
func optional(parse func(string) error) func(string) error {
	return func(v string) error {
		if v == "" {
			return nil
		}
		return parse(v)
	}
}

// listenAddress accepts host:port, the host optional (":<port>" listens
// on every interface); pods are told the port (podUpdateURL).
func listenAddress(dst *string) func(string) error {
	return func(v string) error {
		_, port, err := net.SplitHostPort(v)
		if err != nil || port == "" {
			return errors.New("is not an address host:port (the host may be empty)")
		}
		*dst = v
		return nil
	}
}

func onOff(dst *bool) func(string) error {
	return func(v string) (err error) {
		*dst, err = parseOnOff(v)
		return err
	}
}

func duration(dst *time.Duration, least time.Duration) func(string) error {
	return func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < least {
			return fmt.Errorf("is not a duration of at least %s (such as 30s or 10m)", least)
		}
		*dst = d
		return nil
	}
}

func atLeast(dst *int, least int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < least {
			return fmt.Errorf("is not an integer of at least %d", least)
		}
		*dst = n
		return nil
	}
}

func positive(dst *float32) func(string) error {
	return func(v string) error {
		q, err := strconv.ParseFloat(v, 32)
		if err != nil || q <= 0 {
			return errors.New("is not a positive number")
		}
		*dst = float32(q)
		return nil
	}
}

func size(dst *int64) func(string) error {
	return func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Value() <= 0 {
			return errors.New("is not a size such as 1Gi")
		}
		*dst = q.Value()
		return nil
	}
}

func list(dst *[]string) func(string) error {
	return func(v string) error {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*dst = append(*dst, item)
			}
		}
		return nil
	}
}

// namespaces accepts a comma-separated list of namespace names, sorted
// and without repeats.
func namespaces(dst *[]string) func(string) error {
	return func(v string) error {
		var names []string
		if err := list(&names)(v); err != nil {
			return err
		}
		for _, n := range names {
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				return fmt.Errorf("has %q, which is not a namespace name (%s)", n, strings.Join(errs, "; "))
			}
		}
		slices.Sort(names)
		*dst = slices.Compact(names)
		return nil
	}
}

// httpURL accepts an http(s) URL with a host, ending in suffix when one
// is given; a trailing slash is dropped.
func httpURL(dst *string, suffix string) func(string) error {
	return func(v string) error {
		trimmed := strings.TrimSuffix(v, "/")
		u, err := url.Parse(trimmed)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !strings.HasSuffix(trimmed, suffix) {
			if suffix != "" {
				return fmt.Errorf("is not an http(s) URL ending in %s", suffix)
			}
			return errors.New("is not an http(s) URL")
		}
		*dst = trimmed
		return nil
	}
}

func logLevel(dst *zerolog.Level) func(string) error {
	return func(v string) error {
		l, err := zerolog.ParseLevel(strings.ToLower(v))
		if err != nil || v == "" {
			return errors.New("is not one of debug, info, warn, error")
		}
		*dst = l
		return nil
	}
}

// parseOnOff accepts the spellings AIStor's env vars use.
func parseOnOff(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "yes", "1", "enable", "enabled":
		return true, nil
	case "off", "false", "no", "0", "disable", "disabled", "":
		return false, nil
	}
	return false, errors.New("is neither on nor off")
}

// serviceAccountNamespace is the namespace Kubernetes mounts into every pod.
func serviceAccountNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// mode says where the serving certificate comes from.
type mode int

const (
	modeAutocert mode = iota
	modeCustomSecret
	modeFiles
	modePlainHTTP
)

func (c config) mode() mode {
	switch {
	case c.tlsCertFile != "":
		return modeFiles
	case c.autoCertOff && c.customSecret != "":
		return modeCustomSecret
	case c.autoCertOff:
		return modePlainHTTP
	default:
		return modeAutocert
	}
}

// dnsNames are the Service's names, most specific last, and the host of
// OPERATOR_UPDATE_URL when it is a name; the certificate must cover all of
// them.
func (c config) dnsNames() []string {
	svc := c.serviceName + "." + c.namespace + ".svc"
	names := []string{svc, c.serviceName, c.serviceName + "." + c.namespace, svc + "." + c.clusterDomain}
	if h := c.updateURLHost(); h != "" && net.ParseIP(h) == nil && !slices.Contains(names, h) {
		names = append(names, h)
	}
	return names
}

// ipAddresses is the host of OPERATOR_UPDATE_URL when it is an address:
// pods that reach the upgrade server by address verify it against one.
func (c config) ipAddresses() []net.IP {
	if ip := net.ParseIP(c.updateURLHost()); ip != nil {
		return []net.IP{ip}
	}
	return nil
}

func (c config) updateURLHost() string {
	if c.updateURL == "" {
		return ""
	}
	u, err := url.Parse(c.updateURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// podUpdateURL is the upgrade server's base URL as MinIO pods reach it:
// OPERATOR_UPDATE_URL, else the Service's cluster name on the upgrade port;
// "" outside a cluster with neither (no namespace to name the Service
// in), where the listing's URLs are paths from the root.
func (c config) podUpdateURL() string {
	if c.updateURL != "" {
		return c.updateURL
	}
	if c.namespace == "" {
		return ""
	}
	scheme := "https"
	if c.mode() == modePlainHTTP {
		scheme = "http"
	}
	// The address was checked at load (listenAddress): it has a port.
	_, port, _ := net.SplitHostPort(c.upgradeAddress)
	host := c.serviceName + "." + c.namespace + ".svc." + c.clusterDomain
	return scheme + "://" + net.JoinHostPort(host, port) + upgradeserver.UpdatePath
}
