package trustbundle

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
)

// MaxSize is the largest spec.trustBundle the apiserver accepts (1 MiB,
// certificates.MaxTrustBundleSize).
const MaxSize = 1 << 20

// Anchors is what the bundle will hold: the CA certificates of a PEM
// bundle, each once, as plain PEM blocks without headers, in their order.
type Anchors struct {
	PEM      string
	Subjects []string
	// Skipped says, per entry left out, why: the apiserver refuses a
	// whole bundle for one entry that is not a CA certificate, so such
	// entries are dropped and named in the log instead.
	Skipped []string
}

// ParseAnchors keeps the entries of in the apiserver's validation of a
// ClusterTrustBundle admits (pkg/apis/certificates/validation): CERTIFICATE
// blocks that parse, with the CA bit and valid basic constraints, without
// repeats. It fails when none is left or the result exceeds MaxSize.
// Only the first MaxSize bytes of in are read: the input is a Secret's
// key, already bounded by the apiserver, but the parse is bounded here too.
func ParseAnchors(in []byte) (Anchors, error) {
	var a Anchors
	if len(in) > MaxSize {
		in = in[:MaxSize]
		a.Skipped = append(a.Skipped, "input past 1 MiB")
	}
	var out bytes.Buffer
	seen := map[string]bool{}
	for i := 0; ; i++ {
		var b *pem.Block
		b, in = pem.Decode(in)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			a.Skipped = append(a.Skipped, fmt.Sprintf("entry %d: a %s block, not a certificate", i, b.Type))
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			a.Skipped = append(a.Skipped, fmt.Sprintf("entry %d: not an X.509 certificate", i))
			continue
		}
		if !c.IsCA || !c.BasicConstraintsValid {
			a.Skipped = append(a.Skipped, fmt.Sprintf("entry %d (%s): not a CA certificate", i, c.Subject))
			continue
		}
		if seen[string(c.Raw)] {
			continue
		}
		seen[string(c.Raw)] = true
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		a.Subjects = append(a.Subjects, c.Subject.String())
	}
	if len(a.Subjects) == 0 {
		why := "it holds no PEM certificate"
		if len(a.Skipped) > 0 {
			why = strings.Join(a.Skipped, "; ")
		}
		return a, fmt.Errorf("no CA certificate to publish: %s", why)
	}
	if out.Len() > MaxSize {
		return a, fmt.Errorf("the CA certificates take %d bytes, more than a ClusterTrustBundle holds (1 MiB)", out.Len())
	}
	a.PEM = out.String()
	return a, nil
}
