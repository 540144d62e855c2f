package updates

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
)

// maxAdminResponse bounds what the operator reads from a tenant's admin
// API: server info for hundreds of nodes fits many times over, and a
// hostile endpoint cannot make the operator buffer more.
const maxAdminResponse = 8 << 20

// tenant is how the operator reaches one ObjectStore's MinIO.
type tenant struct {
	endpoint *url.URL
	user     string
	password string
	// roots are the CAs of the tenant's generated Secret: what MinIO
	// trusts, and what the operator trusts MinIO's certificate with.
	roots *x509.CertPool
	// What every host the admin client reaches is checked against: the
	// ObjectStore's namespace and the platform's policy.
	namespace, clusterDomain string
	policy                   EndpointPolicy
	// kube reads the Services, EndpointSlices and Pods a host of the
	// namespace rule leads to.
	kube kubernetes.Interface
	// dial connects to an address the policy let through; nil: a
	// net.Dialer whose Control is the policy's allowDial. Tests set it to
	// see what would be dialled.
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// loadTenant reads the ObjectStore's credentials and CAs. Its errors carry
// a typed reason (ReasonOf).
func (c *Controller) loadTenant(ctx context.Context, store *v1.ObjectStore) (*tenant, error) {
	if store.Spec.Configuration == nil || store.Spec.Configuration.Name == "" {
		return nil, reason.Wrap(CauseConfigurationMissing, errors.New("spec.configuration is not set: the operator needs MinIO's root credentials (Secret key config.env) to ask it to update"))
	}
	t, err := c.reach(ctx, store)
	if err != nil {
		return nil, err
	}
	name := store.Spec.Configuration.Name
	secret, err := c.cfg.Secrets.Get(ctx, store.Namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, reason.Wrap(CauseConfigurationMissing, fmt.Errorf("configuration Secret %s not found in namespace %s", name, store.Namespace))
	}
	if err != nil {
		return nil, fmt.Errorf("get configuration Secret %s/%s: %w", store.Namespace, name, err)
	}
	t.user, t.password, err = parseConfigEnv(secret.Data[v1.ConfigEnvKey])
	if err != nil {
		return nil, reason.Wrap(CauseConfigurationMissing, fmt.Errorf("configuration Secret %s/%s key %s: %w", store.Namespace, name, v1.ConfigEnvKey, err))
	}
	return t, nil
}

// reach is how to reach the ObjectStore's MinIO without credentials (its
// health checks): the endpoint, checked against the policy, and the CAs.
func (c *Controller) reach(ctx context.Context, store *v1.ObjectStore) (*tenant, error) {
	endpoint := store.Spec.Updates.Endpoint
	if endpoint == "" {
		endpoint = fmt.Sprintf("https://%s-hl.%s.svc.%s:9000", store.Name, store.Namespace, c.cfg.ClusterDomain)
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, reason.Wrap(CauseConfigurationMissing, fmt.Errorf("spec.updates.endpoint %q is not an http(s) URL", endpoint))
	}
	// Checked before any Secret is read: credentials go nowhere the
	// policy refuses.
	if u.User != nil {
		return nil, reason.Errorf(CauseEndpointNotAllowed, "spec.updates.endpoint %s carries user info; the host is what follows the @, and credentials come from spec.configuration", u.Redacted())
	}
	if err := c.cfg.AllowedEndpoints.allowHost(u.Host, store.Namespace, c.cfg.ClusterDomain); err != nil {
		return nil, reason.Wrap(CauseEndpointNotAllowed, fmt.Errorf("spec.updates.endpoint: %w", err))
	}
	roots, err := c.tenantCAs(ctx, store)
	if err != nil {
		return nil, err
	}
	return &tenant{endpoint: u, roots: roots,
		namespace: store.Namespace, clusterDomain: c.cfg.ClusterDomain, policy: c.cfg.AllowedEndpoints, kube: c.cfg.Kube}, nil
}

// tenantCAs returns the CAs of the ObjectStore's generated Secret, which is
// what its MinIO trusts (its certs/CAs directory).
func (c *Controller) tenantCAs(ctx context.Context, store *v1.ObjectStore) (*x509.CertPool, error) {
	name := v1.GeneratedSecretName(store.Name)
	secret, err := c.cfg.Secrets.Get(ctx, store.Namespace, name)
	if apierrors.IsNotFound(err) {
		return x509.NewCertPool(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("get generated Secret %s/%s: %w", store.Namespace, name, err)
	}
	return caPool(secret), nil
}

// caPool collects every certificate under the generated Secret's CAs.*
// keys.
func caPool(secret *corev1.Secret) *x509.CertPool {
	pool := x509.NewCertPool()
	for k, v := range secret.Data {
		if strings.HasPrefix(k, "CAs.") {
			pool.AppendCertsFromPEM(v)
		}
	}
	return pool
}

// parseConfigEnv reads MINIO_ROOT_USER and MINIO_ROOT_PASSWORD from the
// `export NAME=value` lines MinIO's operator writes, values quoted or not.
func parseConfigEnv(data []byte) (user, password string, err error) {
	if len(data) == 0 {
		return "", "", errors.New("missing or empty")
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		line = strings.TrimSpace(strings.TrimPrefix(line, "export "))
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
			value = value[1 : len(value)-1]
		}
		switch strings.TrimSpace(name) {
		case "MINIO_ROOT_USER":
			user = value
		case "MINIO_ROOT_PASSWORD":
			password = value
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	if user == "" || password == "" {
		return "", "", errors.New("no `export MINIO_ROOT_USER=...` and `export MINIO_ROOT_PASSWORD=...` lines")
	}
	return user, password, nil
}

// admin returns an admin client for host (host:port; the tenant's
// endpoint when empty) that verifies MinIO's certificate for that host
// with the tenant's CAs. Close its transport's idle connections when done.
// host must pass the endpoint policy (node endpoints come from MinIO's
// server info, which the tenant controls as much as its spec), and so
// must every address dialled: a refusal has the cause
// CauseEndpointNotAllowed and dials nothing. A host of the namespace
// rule is resolved through the API at each connection (resolve), never
// by DNS nor through a proxy; TLS still verifies the certificate for
// the host name.
func (t *tenant) admin(host string) (*madmin.AdminClient, *http.Transport, error) {
	if host == "" {
		host = t.endpoint.Host
	}
	tr, err := t.transport(host, "")
	if err != nil {
		return nil, nil, err
	}
	client, err := madmin.NewWithOptions(host, &madmin.Options{
		Creds:     credentials.NewStaticV4(t.user, t.password, ""),
		Secure:    t.endpoint.Scheme == "https",
		Transport: limitedBodies{tr},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("admin client for %s: %w", host, err)
	}
	return client, tr, nil
}

// transport reaches host as admin says; through a Service of the
// namespace rule, only the endpoint of Pod only when it is not "".
func (t *tenant) transport(host, only string) (*http.Transport, error) {
	target, err := t.policy.route(host, t.namespace, t.clusterDomain)
	if err != nil {
		return nil, reason.Wrap(CauseEndpointNotAllowed, fmt.Errorf("admin client: %w", err))
	}
	dial := t.dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second,
			Control: t.policy.allowDial}).DialContext
	}
	tr := &http.Transport{
		// With a proxy, the proxy resolves and connects: allowDial then
		// checks the proxy's address, allowHost still the host asked for.
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            dial,
		TLSClientConfig:        &tls.Config{RootCAs: t.roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  0, // an update answers only when every node has the binary; ctx bounds it
		MaxResponseHeaderBytes: 64 << 10,
	}
	if target != nil {
		// A proxy would resolve the name by DNS, and reach whatever an
		// ExternalName Service aliases.
		if target.pod == "" || target.pod == only {
			target.only = only
		}
		tr.Proxy = nil
		tr.DialContext = t.dialService(*target, dial)
	}
	return tr, nil
}

// resolveByKey carries into the dial when the reads that find a
// Service's endpoint must be done (time.Time): the rest of the call's
// time is MinIO's (the maintenance check).
type resolveByKey struct{}

// resolveFor is resolve, by the time ctx carries under resolveByKey if
// any (the dial's context keeps the request's values, not its deadline).
func (t *tenant) resolveFor(ctx context.Context, target serviceTarget, port uint16) ([]netip.AddrPort, error) {
	by, ok := ctx.Value(resolveByKey{}).(time.Time)
	if !ok {
		return resolve(ctx, t.kube, target, port)
	}
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	addrs, err := resolve(ctx, t.kube, target, port)
	if err == nil && ctx.Err() != nil {
		// Found, but past its share: the node's time is spent.
		return nil, fmt.Errorf("find the endpoint of Service %s/%s: %w", target.namespace, target.service, ctx.Err())
	}
	return addrs, err
}

// dialService dials the addresses target leads to (resolve), in turn
// until one answers; the port is the one the transport asks for.
func (t *tenant) dialService(target serviceTarget, dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		_, p, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", address, err)
		}
		port, err := strconv.ParseUint(p, 10, 16)
		if err != nil || port == 0 {
			return nil, fmt.Errorf("dial %s: port %q is not a number from 1 to 65535", address, p)
		}
		addrs, err := t.resolveFor(ctx, target, uint16(port))
		if err != nil {
			return nil, notDialled{err}
		}
		var last error
		for _, a := range addrs {
			conn, err := dial(ctx, network, a.String())
			if err == nil {
				return conn, nil
			}
			last = err
		}
		return nil, last
	}
}
