package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/minio/pkg/v3/env"
	"github.com/rs/zerolog"
)

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
}

type rawConfig struct {
	upgradeAddress, updateDir, metricsAddress string
	tlsCertFile, tlsKeyFile                   string
	autoCertDisabled, customSecret            string
	shutdownGrace, logLevel                   string
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
		{"shutdown-grace", "OPERATOR_SHUTDOWN_GRACE", "30s", "how long running downloads may finish after a shutdown signal", &r.shutdownGrace},
		{"log-level", "OPERATOR_LOG_LEVEL", "info", "log level: debug, info, warn or error", &r.logLevel},
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
