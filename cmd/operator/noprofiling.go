//go:build !pprof

package main

import "net/http"

// withProfiling is the identity in the shipped operator; see profiling.go.
func withProfiling(h http.Handler) http.Handler { return h }
