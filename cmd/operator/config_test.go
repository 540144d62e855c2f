package main

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/updates"
)

func TestConfigPrecedenceIsFlagThenEnvThenDefault(t *testing.T) {
	t.Setenv("OPERATOR_UPDATE_DIR", "/from/env")
	t.Setenv("OPERATOR_SHUTDOWN_GRACE", "5s")
	cfg, _, err := loadConfig([]string{"--update-dir", "/from/flag"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "/from/flag", cfg.updateDir)
	assert.Equal(t, 5*time.Second, cfg.shutdownGrace)
	assert.Equal(t, ":4221", cfg.upgradeAddress)
	assert.Equal(t, ":8080", cfg.metricsAddress)
	assert.Equal(t, zerolog.InfoLevel, cfg.logLevel)
	assert.False(t, cfg.autoCertOff)
	assert.True(t, cfg.accessLog, "the access log is on by default")
}

func TestAccessLogTurnsOffAlone(t *testing.T) {
	t.Setenv("OPERATOR_ACCESS_LOG", "off")
	cfg, _, err := loadConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.False(t, cfg.accessLog)
	assert.Equal(t, zerolog.InfoLevel, cfg.logLevel, "the other logs keep their level")
}

func TestConfigRejectsBadValuesNamingTheVariable(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
	}{
		{"auto cert flag", map[string]string{"OPERATOR_AUTO_CERT_DISABLED": "maybe"}, nil, `OPERATOR_AUTO_CERT_DISABLED: "maybe" is neither on nor off`},
		{"grace", map[string]string{"OPERATOR_SHUTDOWN_GRACE": "soon"}, nil, "OPERATOR_SHUTDOWN_GRACE"},
		{"log level", map[string]string{"OPERATOR_LOG_LEVEL": "loud"}, nil, "OPERATOR_LOG_LEVEL"},
		{"access log", map[string]string{"OPERATOR_ACCESS_LOG": "quiet"}, nil, `OPERATOR_ACCESS_LOG: "quiet" is neither on nor off`},
		{"cert without key", nil, []string{"--tls-cert-file", "/tls.crt"}, "set both or neither"},
		{"stray argument", nil, []string{"serve"}, "unexpected arguments"},
		{"expiration below the signer's minimum", map[string]string{"OPERATOR_AUTOCERT_EXPIRATION": "5m"}, nil, "OPERATOR_AUTOCERT_EXPIRATION"},
		{"renew before longer than the lifetime", map[string]string{"OPERATOR_AUTOCERT_EXPIRATION": "1h", "OPERATOR_AUTOCERT_RENEW_BEFORE": "2h"}, nil, "OPERATOR_AUTOCERT_RENEW_BEFORE"},
		{"renew deadline not shorter than the lease", map[string]string{"OPERATOR_LEASE_RENEW_DEADLINE": "20s"}, nil, "OPERATOR_LEASE_RENEW_DEADLINE must be shorter than OPERATOR_LEASE_DURATION"},
		{"a flag is named as a flag", nil, []string{"--shutdown-grace", "soon"}, `--shutdown-grace: "soon" is not a duration`},
		{"so is a pair", map[string]string{"OPERATOR_LEASE_DURATION": "5s"}, []string{"--lease-renew-deadline", "6s"}, "--lease-renew-deadline must be shorter than OPERATOR_LEASE_DURATION"},
		{"empty update dir", nil, []string{"--update-dir", ""}, `--update-dir: "" must not be empty`},
		{"upgrade address without a port, which pods are told", map[string]string{"OPERATOR_UPGRADE_ADDRESS": "0.0.0.0"}, nil, `OPERATOR_UPGRADE_ADDRESS: "0.0.0.0" is not an address host:port`},
		{"burst", map[string]string{"OPERATOR_KUBE_API_BURST": "0"}, nil, `OPERATOR_KUBE_API_BURST: "0" is not an integer of at least 1`},
		{"failure budget beyond what the halt record holds", map[string]string{"OPERATOR_UPDATE_FAILURE_BUDGET": "65"}, nil, `OPERATOR_UPDATE_FAILURE_BUDGET: "65" is more than 64`},
		{"approve flag", map[string]string{"OPERATOR_AUTOCERT_APPROVE": "sometimes"}, nil, "OPERATOR_AUTOCERT_APPROVE"},
		{"update URL without the path", map[string]string{"OPERATOR_UPDATE_URL": "https://operator.example.com:4221"}, nil, "OPERATOR_UPDATE_URL"},
		{"update URL not http", map[string]string{"OPERATOR_UPDATE_URL": "ftp://x/webhook/v1/update"}, nil, "OPERATOR_UPDATE_URL"},
		{"update timeout", map[string]string{"OPERATOR_UPDATE_TIMEOUT": "0s"}, nil, "OPERATOR_UPDATE_TIMEOUT"},
		{"allowed endpoints: a bad CIDR is named", map[string]string{"OPERATOR_ALLOWED_UPDATE_ENDPOINTS": "10.0.0.0/8,10.1.0.0/33"}, nil, `OPERATOR_ALLOWED_UPDATE_ENDPOINTS: "10.0.0.0/8,10.1.0.0/33" has an entry "10.1.0.0/33" that is not a CIDR`},
		{"allowed endpoints: a host with a port is named", map[string]string{"OPERATOR_ALLOWED_UPDATE_ENDPOINTS": "minio.example.com:9000"}, nil, `entry "minio.example.com:9000"`},
		{"allowed endpoints: a URL is named", nil, []string{"--allowed-update-endpoints", "https://minio.example.com"}, `--allowed-update-endpoints: "https://minio.example.com" has an entry "https://minio.example.com" that is a URL`},
		{"watch namespace not a name", map[string]string{"OPERATOR_WATCH_NAMESPACES": "tenant-a,Tenant_B"}, nil, `OPERATOR_WATCH_NAMESPACES: "tenant-a,Tenant_B" has "Tenant_B", which is not a namespace name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, _, err := loadConfig(tt.args, io.Discard)
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestAutoCertDisabledAcceptsAIStorSpellings(t *testing.T) {
	for _, v := range []string{"on", "ON", "true", "1", "yes"} {
		t.Setenv("OPERATOR_AUTO_CERT_DISABLED", v)
		cfg, _, err := loadConfig(nil, io.Discard)
		require.NoError(t, err)
		assert.True(t, cfg.autoCertOff, v)
	}
}

// Every setting must be documented: users configure through env vars they
// read about in docs/configuration.md and in the chart's values.yaml.
func TestEverySettingIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	values, err := os.ReadFile("../../helm/object-store-operator/values.yaml")
	require.NoError(t, err)
	var c config
	for _, s := range c.settings() {
		assert.True(t, strings.Contains(string(doc), "`"+s.env+"`"), "%s missing from docs/configuration.md", s.env)
		assert.True(t, strings.Contains(string(doc), "`--"+s.flag+"`"), "--%s missing from docs/configuration.md", s.flag)
		assert.True(t, strings.Contains(string(values), "#   "+s.env+" "), "%s missing from the chart's values.yaml comments", s.env)
	}
}

func TestModeFollowsSeedSettings(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want mode
	}{
		{"default is autocert", nil, nil, modeAutocert},
		{"AIStor documentation custom certificate", map[string]string{"OPERATOR_AUTO_CERT_DISABLED": "on", "OPERATOR_CUSTOM_TLS_SECRET_NAME": "object-store-operator-tls"}, nil, modeCustomSecret},
		{"autocert off alone is plain HTTP", map[string]string{"OPERATOR_AUTO_CERT_DISABLED": "on"}, nil, modePlainHTTP},
		{"files win", nil, []string{"--tls-cert-file", "a", "--tls-key-file", "b"}, modeFiles},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, _, err := loadConfig(tt.args, io.Discard)
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.mode())
		})
	}
}

func TestCertificateCoversEveryServiceName(t *testing.T) {
	t.Setenv("OPERATOR_NAMESPACE", "ops")
	cfg, _, err := loadConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"object-store-operator.ops.svc", "object-store-operator", "object-store-operator.ops",
		"object-store-operator.ops.svc.cluster.local",
	}, cfg.dnsNames())
}

func TestUpdateURLDefaultsToTheServiceAndItsHostIsCertified(t *testing.T) {
	t.Setenv("OPERATOR_NAMESPACE", "ops")
	cfg, _, err := loadConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "https://object-store-operator.ops.svc.cluster.local:4221/webhook/v1/update", cfg.podUpdateURL())
	assert.Empty(t, cfg.ipAddresses())

	t.Setenv("OPERATOR_UPDATE_URL", "https://minio-updates.example.com:8443/webhook/v1/update/")
	cfg, _, err = loadConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "https://minio-updates.example.com:8443/webhook/v1/update", cfg.podUpdateURL())
	assert.Contains(t, cfg.dnsNames(), "minio-updates.example.com", "autocert asks for the name pods use")

	t.Setenv("OPERATOR_UPDATE_URL", "https://10.1.2.3:4221/webhook/v1/update")
	cfg, _, err = loadConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "10.1.2.3", cfg.ipAddresses()[0].String())
	assert.Len(t, cfg.dnsNames(), 4, "an address is an IP SAN, not a DNS name")

	t.Setenv("OPERATOR_UPDATE_URL", "")
	t.Setenv("OPERATOR_AUTO_CERT_DISABLED", "on")
	cfg, _, err = loadConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "http://object-store-operator.ops.svc.cluster.local:4221/webhook/v1/update", cfg.podUpdateURL(), "plain-HTTP mode")
}

// The remedy of a refused endpoint names the setting that allows more.
func TestAllowedUpdateEndpointsAreParsedAndNamedByTheRemedy(t *testing.T) {
	t.Setenv("OPERATOR_ALLOWED_UPDATE_ENDPOINTS", "10.0.0.0/8, *.Minio.Example.com")
	cfg, _, err := loadConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.0/8,*.minio.example.com", cfg.allowedEndpoints.String())
	assert.Contains(t, cfg.why.updates.Remedy(updates.CauseEndpointNotAllowed), "OPERATOR_ALLOWED_UPDATE_ENDPOINTS")
}

func TestUnknownOperatorVariablesAreNamed(t *testing.T) {
	t.Setenv("OPERATOR_AUTO_CERT_DISABLE", "on") // a typo of OPERATOR_AUTO_CERT_DISABLED
	t.Setenv("OPERATOR_NAMESPACE", "ops")
	_, unknown, err := loadConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"OPERATOR_AUTO_CERT_DISABLE"}, unknown)
}

func TestWatchNamespacesAreSortedWithoutRepeats(t *testing.T) {
	cfg, _, err := loadConfig([]string{"--watch-namespaces", " tenant-b, tenant-a,,tenant-b "}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"tenant-a", "tenant-b"}, cfg.watchNamespaces)

	cfg, _, err = loadConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Empty(t, cfg.watchNamespaces, "every namespace by default")
}
