// Command nethttp serves one file at every path the way the upgrade
// server's http.Server is set up (its TLS configuration, timeouts and
// header limit) with none of the operator's own code: no router, metrics,
// access log or connection limit. make bench runs it beside the operator
// and nginx, so the listing's ratio to it is what the operator's own code
// costs, and its ratio to nginx is what Go's HTTP stack costs.
//
// Usage: nethttp FILE CERT KEY ADDRESS [HEAP_FLOOR_BYTES]
//
// HEAP_FLOOR_BYTES is the operator's garbage-collector floor (its log's
// heapFloorBytes), so that both collect alike.
package main

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/object-store-operator/operator/internal/gcfloor"
	"github.com/object-store-operator/operator/upgradeserver"
)

type fixedCert struct{ cert *tls.Certificate }

func (f fixedCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return f.cert, nil }

func main() {
	if len(os.Args) != 5 && len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: nethttp FILE CERT KEY ADDRESS [HEAP_FLOOR_BYTES]")
		os.Exit(2)
	}
	if len(os.Args) == 6 {
		floor, err := strconv.ParseUint(os.Args[5], 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "nethttp: heap floor:", err)
			os.Exit(2)
		}
		if floor > 0 {
			gcfloor.Start(floor, 100) // for the life of the process
		}
	}
	// ListenAndServeTLS returns only on an error: the process ends there.
	if err := run(os.Args[1], os.Args[2], os.Args[3], os.Args[4]); err != nil {
		fmt.Fprintln(os.Stderr, "nethttp:", err)
		os.Exit(1)
	}
}

func run(file, certFile, keyFile, addr string) error {
	body, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	// The listing's headers, as shared slices the way the operator sets
	// them: the response is byte for byte the operator's but for Date.
	var (
		contentType  = []string{"application/json"}
		etag         = []string{`"` + hex.EncodeToString(sum[:16]) + `"`}
		cacheControl = []string{"no-cache"}
		length       = []string{strconv.Itoa(len(body))}
	)
	srv := &http.Server{
		Addr:              addr,
		TLSConfig:         upgradeserver.TLSConfig(fixedCert{&cert}),
		Protocols:         upgradeserver.Protocols(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		// wrk closes connections mid-handshake when a run ends.
		ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			h := w.Header()
			h["Content-Type"], h["Etag"], h["Cache-Control"], h["Content-Length"] = contentType, etag, cacheControl, length
			_, _ = w.Write(body)
		}),
	}
	return srv.ListenAndServeTLS("", "")
}
