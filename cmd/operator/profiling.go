//go:build pprof

package main

import (
	"net/http"
	"net/http/pprof"
)

// withProfiling adds Go's profiling endpoints under /debug/pprof/ on the
// metrics port. Only binaries built with -tags pprof (make bench
// BENCH_PROFILE=1) have them: profiles expose internals and cost CPU, so
// the shipped operator never does.
func withProfiling(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
