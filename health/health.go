// Package health serves the operator's probes and Prometheus metrics on a
// plain-HTTP address of their own, apart from the TLS upgrade server.
package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// Checks is a set of named readiness checks.
type Checks struct {
	mu     sync.RWMutex
	checks map[string]func() error
}

// Add registers a readiness check; /readyz fails while any check fails.
func (c *Checks) Add(name string, check func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checks == nil {
		c.checks = map[string]func() error{}
	}
	c.checks[name] = check
}

// Ready runs every check and joins their failures.
func (c *Checks) Ready() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	names := make([]string, 0, len(c.checks))
	for n := range c.checks {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		if err := c.checks[n](); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// Collector exports objectstore_operator_ready{check} 1 or 0 for every
// check, run when scraped: Prometheus scrapes a replica whether it is
// ready or not, so an alert sees one that runs but is out of its
// Service, and which check holds it back.
func (c *Checks) Collector() prometheus.Collector {
	return readyCollector{checks: c, desc: prometheus.NewDesc("objectstore_operator_ready",
		"1 while the replica's readiness check passes, else 0 (/readyz fails while any is 0).", []string{"check"}, nil)}
}

type readyCollector struct {
	checks *Checks
	desc   *prometheus.Desc
}

func (r readyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r readyCollector) Collect(ch chan<- prometheus.Metric) {
	r.checks.mu.RLock()
	defer r.checks.mu.RUnlock()
	for name, check := range r.checks.checks {
		v := 0.0
		if check() == nil {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, v, name)
	}
}

// Handler serves /healthz (the process is up), /readyz (every check
// passes; the body says which do not) and /metrics.
func Handler(checks *Checks, gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := checks.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready:\n%s\n", strings.TrimSpace(err.Error()))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return mux
}

// Serve serves h on address until ctx ends.
func Serve(ctx context.Context, address string, h http.Handler, log zerolog.Logger) error {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return fmt.Errorf("metrics and probes listen on %s: %w", address, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info().Str("component", "health").Str("address", ln.Addr().String()).Msg("probes and metrics listening")
	select {
	case err := <-errc:
		return fmt.Errorf("metrics and probes server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("metrics and probes shutdown: %w", err)
	}
	return nil
}
