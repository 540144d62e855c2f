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

	"github.com/object-store-operator/operator/binsource"
	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/upgradeserver"
)

// minioReleaseKey is the key MinIO signs its releases with, the one its
// update client trusts when MINIO_UPDATE_MINISIGN_PUBKEY is unset.
const minioReleaseKey = "RWTx5Zr1tiHQLwG9keckT0c45M3AGeHD6IvimQHpyRywVWGbP1aVSGav"

// setting is one configuration value: a flag, the environment variable
// behind its default, and the built-in default. Flags win over env vars,
// env vars over defaults. docs/configuration.md lists every one of them
// (a test keeps it honest).
type setting struct {
	flag, env, def, help string
	value                *string
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

	kubeconfig      string
	namespace       string
	serviceName     string
	clusterDomain   string
	signerName      string
	approve         bool
	csrTimeout      time.Duration
	expiration      time.Duration
	renewBefore     time.Duration
	autocertSecret  string
	servingCASecret string
	leaderElection  bool
	leaseDuration   time.Duration
	renewDeadline   time.Duration
	retryPeriod     time.Duration
	resync          time.Duration
	qps             float32
	burst           int
	mirrorURL       string
	storeKeep       int
	pullConcurrency int
	maxBinarySize   int64
	platforms       []binsource.Platform
	minisignKeys    []minisign.PublicKey
	signingKey      string
	insecureRegs    []string
	pullTimeout     time.Duration
	pullMaxBytes    int64
	updateURL       string
	updateTimeout   time.Duration
	maxDownloads    int
	maxConns        int
}

type rawConfig struct {
	upgradeAddress, updateDir, metricsAddress string
	tlsCertFile, tlsKeyFile                   string
	autoCertDisabled, customSecret            string
	shutdownGrace, logLevel                   string

	kubeconfig, namespace, serviceName, clusterDomain string
	signerName, approve, csrTimeout                   string
	expiration, renewBefore                           string
	autocertSecret, servingCASecret                   string
	leaderElection                                    string
	leaseDuration, renewDeadline, retryPeriod         string
	resync                                            string
	qps, burst                                        string
	mirrorURL, storeKeep, pullConcurrency             string
	maxBinarySize, platforms                          string
	minisignKeys, signingKey, insecureRegs            string
	pullTimeout, pullMaxBytes                         string
	updateURL, updateTimeout, maxDownloads, maxConns  string
}

func (r *rawConfig) settings() []setting {
	return []setting{
		{"upgrade-address", "OPERATOR_UPGRADE_ADDRESS", ":4221", "address of the TLS upgrade server", &r.upgradeAddress},
		{"update-dir", "OPERATOR_UPDATE_DIR", "/var/lib/object-store-operator/updates", "directory of MinIO binaries to serve", &r.updateDir},
		{"metrics-address", "OPERATOR_METRICS_ADDRESS", ":8080", "plain-HTTP address for /healthz, /readyz and /metrics", &r.metricsAddress},
		{"tls-cert-file", "OPERATOR_TLS_CERT_FILE", "", "serve the certificate (chain) in this PEM file; reloaded when it changes", &r.tlsCertFile},
		{"tls-key-file", "OPERATOR_TLS_KEY_FILE", "", "private key for --tls-cert-file", &r.tlsKeyFile},
		{"auto-cert-disabled", "OPERATOR_AUTO_CERT_DISABLED", "off", "on: do not request a certificate from the Kubernetes CSR API", &r.autoCertDisabled},
		{"custom-tls-secret-name", "OPERATOR_CUSTOM_TLS_SECRET_NAME", "", "Secret in the operator namespace with the serving certificate (when autocert is disabled)", &r.customSecret},
		{"max-downloads", "OPERATOR_MAX_DOWNLOADS", "64", "binary downloads served at once; more are answered 503 with Retry-After (each holds a 256 KiB buffer)", &r.maxDownloads},
		{"max-connections", "OPERATOR_MAX_CONNECTIONS", "4096", "connections to the upgrade server open at once; more are closed on accept (about 64 KiB each)", &r.maxConns},
		{"shutdown-grace", "OPERATOR_SHUTDOWN_GRACE", "30s", "how long running downloads may finish after a shutdown signal", &r.shutdownGrace},
		{"log-level", "OPERATOR_LOG_LEVEL", "info", "log level: debug, info, warn or error", &r.logLevel},
		{"kubeconfig", "KUBECONFIG", "", "kubeconfig file; empty means the in-cluster service account", &r.kubeconfig},
		{"namespace", "OPERATOR_NAMESPACE", serviceAccountNamespace(), "the operator's namespace (downward API); default: the service account's", &r.namespace},
		{"service-name", "OPERATOR_SERVICE_NAME", "object-store-operator", "name of the Service in front of the upgrade server", &r.serviceName},
		{"cluster-domain", "CLUSTER_DOMAIN", "cluster.local", "cluster DNS domain, for the certificate's SANs", &r.clusterDomain},
		{"csr-signer-name", "OPERATOR_CSR_SIGNER_NAME", "", "signer for the autocert CSR; empty: kubernetes.io/kubelet-serving, or beta.eks.amazonaws.com/app-serving on EKS", &r.signerName},
		{"autocert-approve", "OPERATOR_AUTOCERT_APPROVE", "on", "on: the operator approves its own CSR; off: an admin or policy engine approves", &r.approve},
		{"autocert-timeout", "OPERATOR_AUTOCERT_TIMEOUT", "5m", "how long one CSR may wait for approval and signing before it is retried", &r.csrTimeout},
		{"autocert-expiration", "OPERATOR_AUTOCERT_EXPIRATION", "8760h", "requested certificate lifetime (spec.expirationSeconds, at least 10m; the signer may shorten it)", &r.expiration},
		{"autocert-renew-before", "OPERATOR_AUTOCERT_RENEW_BEFORE", "", "renew this long before expiry; empty: a third of the certificate's lifetime", &r.renewBefore},
		{"autocert-secret-name", "OPERATOR_AUTOCERT_SECRET_NAME", "object-store-operator-tls", "Secret in the operator namespace where autocert stores tls.crt, tls.key and ca.crt", &r.autocertSecret},
		{"serving-ca-secret", "OPERATOR_SERVING_CA_SECRET", "", "Secret in the operator namespace whose ca.crt is the CA pods must trust for the upgrade server (overrides what the operator works out)", &r.servingCASecret},
		{"leader-election", "OPERATOR_LEADER_ELECTION", "on", "on: replicas elect a leader (Lease object-store-operator) that files CSRs and writes Secrets", &r.leaderElection},
		{"lease-duration", "OPERATOR_LEASE_DURATION", "15s", "leader election: how long a lease is valid", &r.leaseDuration},
		{"lease-renew-deadline", "OPERATOR_LEASE_RENEW_DEADLINE", "10s", "leader election: how long the leader tries to renew before giving up", &r.renewDeadline},
		{"lease-retry-period", "OPERATOR_LEASE_RETRY_PERIOD", "2s", "leader election: how often candidates retry", &r.retryPeriod},
		{"resync-period", "OPERATOR_RESYNC_PERIOD", "10m", "how often every watched object is re-checked even without events", &r.resync},
		{"kube-api-qps", "OPERATOR_KUBE_API_QPS", "300", "sustained requests per second to the Kubernetes API (a shared CA rotates into every generated Secret at about this rate)", &r.qps},
		{"kube-api-burst", "OPERATOR_KUBE_API_BURST", "600", "burst of requests to the Kubernetes API", &r.burst},
		{"release-mirror-url", "OPERATOR_RELEASE_MIRROR_URL", "", "mirror of MinIO release directories (<url>/<os>-<arch>/minio.<RELEASE>) for releases no image provides", &r.mirrorURL},
		{"store-keep", "OPERATOR_STORE_KEEP", "3", "unreferenced releases are removed once this many newer ones exist", &r.storeKeep},
		{"pull-concurrency", "OPERATOR_PULL_CONCURRENCY", "2", "image pulls and mirror downloads running at once", &r.pullConcurrency},
		{"max-binary-size", "OPERATOR_MAX_BINARY_SIZE", "1Gi", "largest binary accepted from an image or mirror (Kubernetes quantity)", &r.maxBinarySize},
		{"platforms", "OPERATOR_PLATFORMS", "linux/amd64,linux/arm64", "platforms fetched into <os>-<arch>/ directories", &r.platforms},
		{"minisign-pubkeys", "OPERATOR_MINISIGN_PUBKEYS", minioReleaseKey, "comma-separated minisign public keys a binary's .minisig must verify against (default: MinIO's release key)", &r.minisignKeys},
		{"signing-key-secret", "OPERATOR_SIGNING_KEY_SECRET", "", "Secret in the operator namespace with a platform minisign secret key (minisign.key, optional password) that signs binaries from verified images that ship none", &r.signingKey},
		{"insecure-registries", "OPERATOR_INSECURE_REGISTRIES", "", "comma-separated registry hosts (host[:port]) reached over plain HTTP; every other registry over HTTPS only", &r.insecureRegs},
		{"pull-timeout", "OPERATOR_PULL_TIMEOUT", "10m", "deadline of one image pull or mirror download", &r.pullTimeout},
		{"pull-max-bytes", "OPERATOR_PULL_MAX_BYTES", "4Gi", "most bytes one pull reads from a registry, compressed and uncompressed alike (Kubernetes quantity)", &r.pullMaxBytes},
		{"update-url", "OPERATOR_UPDATE_URL", "", "base URL (up to /webhook/v1/update) MinIO pods fetch in-place updates from; empty: https://<service>.<namespace>.svc.<cluster-domain>:<upgrade port>/webhook/v1/update", &r.updateURL},
		{"update-timeout", "OPERATOR_UPDATE_TIMEOUT", "10m", "how long an in-place update may take, from the call until every node runs the release, before the operator rolls the StatefulSets instead", &r.updateTimeout},
	}
}

// loadConfig reads flags from args, with defaults from the environment.
func loadConfig(args []string, out io.Writer) (config, error) {
	var raw rawConfig
	fs := flag.NewFlagSet("object-store-operator", flag.ContinueOnError)
	fs.SetOutput(out)
	for _, s := range raw.settings() {
		fs.StringVar(s.value, s.flag, env.Get(s.env, s.def), fmt.Sprintf("%s (env %s)", s.help, s.env))
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return raw.resolve()
}

func (r *rawConfig) resolve() (config, error) {
	c := config{
		upgradeAddress: r.upgradeAddress,
		updateDir:      r.updateDir,
		metricsAddress: r.metricsAddress,
		tlsCertFile:    r.tlsCertFile,
		tlsKeyFile:     r.tlsKeyFile,
		customSecret:   r.customSecret,

		kubeconfig:      r.kubeconfig,
		namespace:       r.namespace,
		serviceName:     r.serviceName,
		clusterDomain:   r.clusterDomain,
		signerName:      r.signerName,
		autocertSecret:  r.autocertSecret,
		servingCASecret: r.servingCASecret,
	}
	var errs []error
	var err error
	if c.autoCertOff, err = parseOnOff(r.autoCertDisabled); err != nil {
		errs = append(errs, fmt.Errorf("OPERATOR_AUTO_CERT_DISABLED: %w", err))
	}
	if c.shutdownGrace, err = time.ParseDuration(r.shutdownGrace); err != nil || c.shutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("OPERATOR_SHUTDOWN_GRACE: %q is not a non-negative duration such as 30s", r.shutdownGrace))
	}
	if c.logLevel, err = zerolog.ParseLevel(strings.ToLower(r.logLevel)); err != nil || r.logLevel == "" {
		errs = append(errs, fmt.Errorf("OPERATOR_LOG_LEVEL: %q is not one of debug, info, warn, error", r.logLevel))
	}
	if c.approve, err = parseOnOff(r.approve); err != nil {
		errs = append(errs, fmt.Errorf("OPERATOR_AUTOCERT_APPROVE: %w", err))
	}
	if c.leaderElection, err = parseOnOff(r.leaderElection); err != nil {
		errs = append(errs, fmt.Errorf("OPERATOR_LEADER_ELECTION: %w", err))
	}
	for _, d := range []struct {
		name string
		raw  string
		dst  *time.Duration
		min  time.Duration
	}{
		{"OPERATOR_AUTOCERT_TIMEOUT", r.csrTimeout, &c.csrTimeout, time.Second},
		{"OPERATOR_AUTOCERT_EXPIRATION", r.expiration, &c.expiration, 10 * time.Minute},
		{"OPERATOR_LEASE_DURATION", r.leaseDuration, &c.leaseDuration, time.Second},
		{"OPERATOR_LEASE_RENEW_DEADLINE", r.renewDeadline, &c.renewDeadline, time.Second},
		{"OPERATOR_LEASE_RETRY_PERIOD", r.retryPeriod, &c.retryPeriod, 100 * time.Millisecond},
		{"OPERATOR_RESYNC_PERIOD", r.resync, &c.resync, time.Second},
		{"OPERATOR_PULL_TIMEOUT", r.pullTimeout, &c.pullTimeout, time.Second},
		{"OPERATOR_UPDATE_TIMEOUT", r.updateTimeout, &c.updateTimeout, time.Second},
	} {
		v, err := time.ParseDuration(d.raw)
		if err != nil || v < d.min {
			errs = append(errs, fmt.Errorf("%s: %q is not a duration of at least %s", d.name, d.raw, d.min))
		}
		*d.dst = v
	}
	if q, err := strconv.ParseFloat(r.qps, 32); err != nil || q <= 0 {
		errs = append(errs, fmt.Errorf("OPERATOR_KUBE_API_QPS: %q is not a positive number", r.qps))
	} else {
		c.qps = float32(q)
	}
	if c.burst, err = strconv.Atoi(r.burst); err != nil || c.burst < 1 {
		errs = append(errs, fmt.Errorf("OPERATOR_KUBE_API_BURST: %q is not a positive integer", r.burst))
	}
	c.mirrorURL = r.mirrorURL
	if r.mirrorURL != "" {
		if u, err := url.Parse(r.mirrorURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("OPERATOR_RELEASE_MIRROR_URL: %q is not an http(s) URL", r.mirrorURL))
		}
	}
	if c.storeKeep, err = strconv.Atoi(r.storeKeep); err != nil || c.storeKeep < 0 {
		errs = append(errs, fmt.Errorf("OPERATOR_STORE_KEEP: %q is not a non-negative integer", r.storeKeep))
	}
	if c.maxDownloads, err = strconv.Atoi(r.maxDownloads); err != nil || c.maxDownloads < 1 {
		errs = append(errs, fmt.Errorf("OPERATOR_MAX_DOWNLOADS: %q is not a positive integer", r.maxDownloads))
	}
	if c.maxConns, err = strconv.Atoi(r.maxConns); err != nil || c.maxConns < 1 {
		errs = append(errs, fmt.Errorf("OPERATOR_MAX_CONNECTIONS: %q is not a positive integer", r.maxConns))
	}
	if c.pullConcurrency, err = strconv.Atoi(r.pullConcurrency); err != nil || c.pullConcurrency < 1 {
		errs = append(errs, fmt.Errorf("OPERATOR_PULL_CONCURRENCY: %q is not a positive integer", r.pullConcurrency))
	}
	if q, err := resource.ParseQuantity(r.maxBinarySize); err != nil || q.Value() <= 0 {
		errs = append(errs, fmt.Errorf("OPERATOR_MAX_BINARY_SIZE: %q is not a size such as 1Gi", r.maxBinarySize))
	} else {
		c.maxBinarySize = q.Value()
	}
	if q, err := resource.ParseQuantity(r.pullMaxBytes); err != nil || q.Value() <= 0 {
		errs = append(errs, fmt.Errorf("OPERATOR_PULL_MAX_BYTES: %q is not a size such as 4Gi", r.pullMaxBytes))
	} else {
		c.pullMaxBytes = q.Value()
	}
	if c.minisignKeys, err = binstore.ParsePublicKeys(r.minisignKeys); err != nil {
		errs = append(errs, fmt.Errorf("OPERATOR_MINISIGN_PUBKEYS: %w", err))
	}
	c.signingKey = r.signingKey
	c.updateURL = strings.TrimSuffix(r.updateURL, "/")
	if r.updateURL != "" {
		if u, err := url.Parse(r.updateURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
			!strings.HasSuffix(c.updateURL, "/webhook/v1/update") {
			errs = append(errs, fmt.Errorf("OPERATOR_UPDATE_URL: %q is not an http(s) URL ending in /webhook/v1/update", r.updateURL))
		}
	}
	for _, host := range strings.Split(r.insecureRegs, ",") {
		if host = strings.TrimSpace(host); host != "" {
			c.insecureRegs = append(c.insecureRegs, host)
		}
	}
	if c.platforms, err = binsource.ParsePlatforms(r.platforms); err != nil {
		errs = append(errs, fmt.Errorf("OPERATOR_PLATFORMS: %w", err))
	}
	if r.renewBefore != "" {
		if c.renewBefore, err = time.ParseDuration(r.renewBefore); err != nil || c.renewBefore <= 0 || c.renewBefore >= c.expiration {
			errs = append(errs, fmt.Errorf("OPERATOR_AUTOCERT_RENEW_BEFORE: %q must be a positive duration shorter than OPERATOR_AUTOCERT_EXPIRATION", r.renewBefore))
		}
	}
	if c.renewDeadline >= c.leaseDuration {
		errs = append(errs, errors.New("OPERATOR_LEASE_RENEW_DEADLINE must be shorter than OPERATOR_LEASE_DURATION"))
	}
	if (c.tlsCertFile == "") != (c.tlsKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file go together: set both or neither"))
	}
	if c.updateDir == "" {
		errs = append(errs, errors.New("OPERATOR_UPDATE_DIR must not be empty"))
	}
	return c, errors.Join(errs...)
}

// parseOnOff accepts the spellings AIStor's env vars use.
func parseOnOff(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "yes", "1", "enable", "enabled":
		return true, nil
	case "off", "false", "no", "0", "disable", "disabled", "":
		return false, nil
	}
	return false, fmt.Errorf("%q is neither on nor off", v)
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
// OPERATOR_UPDATE_URL, else the Service's cluster name on the upgrade port.
func (c config) podUpdateURL() string {
	if c.updateURL != "" {
		return c.updateURL
	}
	scheme := "https"
	if c.mode() == modePlainHTTP {
		scheme = "http"
	}
	_, port, err := net.SplitHostPort(c.upgradeAddress)
	if err != nil || port == "" {
		port = "4221"
	}
	host := c.serviceName + "." + c.namespace + ".svc." + c.clusterDomain
	return scheme + "://" + net.JoinHostPort(host, port) + upgradeserver.UpdatePath
}
