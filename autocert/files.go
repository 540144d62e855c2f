package autocert

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"time"

	"github.com/minio/pkg/v3/certs"

	"github.com/object-store-operator/operator/internal/pemutil"
)

// WatchFiles serves the key pair in certFile and keyFile (for example the
// paths OLM mounts, /tmp/k8s-webhook-server/serving-certs/tls.crt and
// tls.key) through cur, and reloads it when the files change. Files that
// are missing or invalid at start are retried every interval; the operator
// stays unready meanwhile. It returns when ctx ends.
func WatchFiles(ctx context.Context, cur *Current, certFile, keyFile string, interval time.Duration) error {
	origin := fmt.Sprintf("files %s and %s", certFile, keyFile)
	load := func(certFile, keyFile string) (tls.Certificate, error) {
		cert, err := readKeyPair(certFile, keyFile)
		if err != nil {
			cur.Reject(KindFiles, origin, err)
			return tls.Certificate{}, err
		}
		// Offer validates and swaps; a rejected candidate leaves the
		// served certificate alone and certs keeps its previous one too.
		if err := cur.Offer(KindFiles, origin, cert, nil); err != nil {
			return tls.Certificate{}, err
		}
		return *cert, nil
	}

	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		c, err := certs.NewCertificate(certFile, keyFile, load)
		if err == nil {
			// Watch reloads on file events and, in Kubernetes (where
			// mounted files change through symlink swaps), every interval.
			c.Watch(ctx, interval)
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func readKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	return pemutil.ParseKeyPair(certPEM, keyPEM)
}
