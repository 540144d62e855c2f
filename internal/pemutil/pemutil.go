// Package pemutil reads PEM from Kubernetes Secrets: a key pair and CA
// certificates, under the key names kubernetes.io/tls, cert-manager and
// MinIO use, with errors that say what to fix. autocert, trust and
// mountsecret read the same Secrets the same way through it.
package pemutil

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Secret keys, kubernetes.io/tls and cert-manager style first, MinIO style second.
const (
	KeyTLSCert    = "tls.crt"
	KeyTLSKey     = "tls.key"
	KeyCA         = "ca.crt"
	KeyPublicCert = "public.crt"
	KeyPrivateKey = "private.key"
)

// What is wrong with a key pair; the errors of ParseKeyPair and
// KeyPairFromSecret wrap one of them.
var (
	ErrMissing     = errors.New("missing")
	ErrGarbage     = errors.New("garbage")
	ErrKeyMismatch = errors.New("key mismatch")
)

// caKeys are the keys a CA Secret may hold its certificates under.
var caKeys = []string{KeyCA, KeyPublicCert, KeyTLSCert}

// KeyPairFromSecret reads the key pair a Secret holds: tls.crt/tls.key
// (kubernetes.io/tls, cert-manager) or public.crt/private.key (MinIO). It
// returns the PEM as stored and the parsed certificate; a missing half, or
// a key of another certificate, is an error that says which.
func KeyPairFromSecret(s *corev1.Secret) (certPEM, keyPEM []byte, cert *tls.Certificate, err error) {
	certKey, keyKey := KeyTLSCert, KeyTLSKey
	certPEM, keyPEM = s.Data[KeyTLSCert], s.Data[KeyTLSKey]
	if len(certPEM) == 0 && len(keyPEM) == 0 {
		certKey, keyKey = KeyPublicCert, KeyPrivateKey
		certPEM, keyPEM = s.Data[KeyPublicCert], s.Data[KeyPrivateKey]
	}
	if len(certPEM) == 0 && len(keyPEM) == 0 {
		return nil, nil, nil, fmt.Errorf("%w: no %s/%s (or %s/%s) keys in the Secret", ErrMissing, KeyTLSCert, KeyTLSKey, KeyPublicCert, KeyPrivateKey)
	}
	// Half a pair: name the key that is missing, and the one present.
	switch certBlank, keyBlank := blank(certPEM), blank(keyPEM); {
	case keyBlank && !certBlank:
		return nil, nil, nil, fmt.Errorf("%w: private key is missing: the Secret has %s but no %s", ErrMissing, certKey, keyKey)
	case certBlank && !keyBlank:
		return nil, nil, nil, fmt.Errorf("%w: certificate is missing: the Secret has %s but no %s", ErrMissing, keyKey, certKey)
	}
	if cert, err = ParseKeyPair(certPEM, keyPEM); err != nil {
		return nil, nil, nil, err
	}
	return certPEM, keyPEM, cert, nil
}

func blank(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

// ParseKeyPair builds a certificate from PEM, with reasons a person can act
// on instead of crypto/tls's terse ones. certPEM may hold the full chain.
func ParseKeyPair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	switch {
	case blank(certPEM) && blank(keyPEM):
		return nil, fmt.Errorf("%w: certificate and private key are both missing or empty", ErrMissing)
	case blank(certPEM):
		return nil, fmt.Errorf("%w: certificate is missing or empty", ErrMissing)
	case blank(keyPEM):
		return nil, fmt.Errorf("%w: private key is missing or empty", ErrMissing)
	}
	if !hasPEMBlock(certPEM, "CERTIFICATE") {
		return nil, fmt.Errorf("%w: certificate holds no PEM CERTIFICATE block", ErrGarbage)
	}
	if !hasPEMBlock(keyPEM, "PRIVATE KEY") {
		return nil, fmt.Errorf("%w: private key holds no PEM PRIVATE KEY block", ErrGarbage)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "type does not match"):
			return nil, fmt.Errorf("%w: private key type does not match the certificate's key type (RSA/ECDSA/Ed25519 mix-up): %v", ErrKeyMismatch, err)
		case strings.Contains(msg, "does not match"):
			return nil, fmt.Errorf("%w: private key belongs to another certificate: %v", ErrKeyMismatch, err)
		default:
			return nil, fmt.Errorf("%w: cannot parse key pair: %v", ErrGarbage, err)
		}
	}
	return &cert, nil
}

func hasPEMBlock(data []byte, suffix string) bool {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return false
		}
		if strings.HasSuffix(block.Type, suffix) {
			return true
		}
	}
}

// Certificates returns every PEM certificate in a CA Secret's keys ca.crt,
// public.crt and tls.crt, and a description of each key that holds
// something else.
func Certificates(s *corev1.Secret) ([]*x509.Certificate, []string) {
	var certs []*x509.Certificate
	var problems []string
	for _, k := range caKeys {
		data, ok := s.Data[k]
		if !ok {
			continue
		}
		found, broken := 0, false
		rest := bytes.TrimSpace(data)
		for len(rest) > 0 {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				problems = append(problems, fmt.Sprintf("%s: data that is not PEM", k))
				broken = true
				break
			}
			if block.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: certificate does not parse: %v", k, err))
				broken = true
				continue
			}
			certs = append(certs, c)
			found++
			rest = bytes.TrimSpace(rest)
		}
		if found == 0 && !broken {
			problems = append(problems, fmt.Sprintf("%s: no PEM certificate", k))
		}
	}
	if len(certs) == 0 && len(problems) == 0 {
		problems = append(problems, "no PEM certificate: none of the keys ca.crt, public.crt, tls.crt is present")
	}
	return certs, problems
}
