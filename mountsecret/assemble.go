package mountsecret

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/pemutil"
	"github.com/object-store-operator/operator/internal/reason"
)

// Keys of the generated Secret. Secret keys cannot hold "/", so the
// layout is flat; docs/mount-secret.md maps it onto MinIO's certs
// directory with a projected volume.
const (
	KeyPublicCert = "public.crt"  // first server certificate (chain)
	KeyPrivateKey = "private.key" // its key
	// KeyOperatorCA is the CA that signs the upgrade server's certificate.
	KeyOperatorCA = "CAs.operator.crt"
)

func serverCertKey(secret string) string { return secret + ".public.crt" }
func serverKeyKey(secret string) string  { return secret + ".private.key" }
func serverCAKey(secret string) string   { return "CAs.server." + secret + ".crt" }
func trustedCAKey(secret string) string  { return "CAs.trusted." + secret + ".crt" }
func clientCertKey(secret string) string { return "client." + secret + ".crt" }
func clientKeyKey(secret string) string  { return "client." + secret + ".key" }

// problem is what is wrong with a Secret the user must fix; nothing is
// written until they do. It reaches the condition filed under its reason
// (newProblem).
type problem struct {
	secret string
	// field is where the ObjectStore names the Secret
	// (spec.certificates.trustedCAs[1]); empty for the generated Secret.
	field  string
	detail string
}

// newProblem is a problem (detail) of the Secret secret, named by field,
// reported under the condition reason name.
func newProblem(name, secret, field, detail string) error {
	return &reason.Error{Reason: name, Err: &problem{secret: secret, field: field, detail: detail}}
}

func (p *problem) Error() string {
	if p.field == "" {
		return fmt.Sprintf("Secret %s: %s", p.secret, p.detail)
	}
	return fmt.Sprintf("Secret %s (named by %s): %s", p.secret, p.field, p.detail)
}

// assembly is the generated Secret's data and what went into it.
type assembly struct {
	data map[string][]byte
	// sources maps each input (referenced Secret, or "operator CA") to a
	// short digest of what it contributed, to name what changed.
	sources map[string]string
	// hash is the SHA-256 of data, recorded on the generated Secret.
	hash string
	// bytes is the size of data, keys and values, as the apiserver counts.
	bytes int
}

// secretGetter reads a Secret; the result must not be modified.
type secretGetter interface {
	Get(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// assemble reads every referenced Secret and lays out the generated data.
// The same inputs always give the same bytes.
func assemble(ctx context.Context, os *v1.ObjectStore, secrets secretGetter, operatorCA []byte) (*assembly, error) {
	a := &assembly{data: map[string][]byte{}, sources: map[string]string{}}
	// Each Secret is read only while what was read so far fits: a tenant
	// may reference a hundred Secrets of 1 MiB, and holding them all to
	// learn that the result is too large would let one sync take a
	// hundred MiB of the operator's memory (eight workers, a GiB).
	get := func(field, name string) (*corev1.Secret, error) {
		if a.bytes > maxSecretSize {
			return nil, a.tooLarge(os, field)
		}
		s, err := secrets.Get(ctx, os.Namespace, name)
		if apierrors.IsNotFound(err) {
			return nil, newProblem(ReasonSecretNotFound, name, field, "not found in namespace "+os.Namespace)
		}
		if err != nil {
			return nil, fmt.Errorf("get Secret %s/%s: %w", os.Namespace, name, err)
		}
		return s, nil
	}
	for i, ref := range os.Spec.Certificates.Server {
		field := fmt.Sprintf("spec.certificates.server[%d]", i)
		s, err := get(field, ref.Name)
		if err != nil {
			return nil, err
		}
		cert, key, _, err := pemutil.KeyPairFromSecret(s)
		if err != nil {
			return nil, newProblem(ReasonSecretMalformed, ref.Name, field, "server certificate: "+err.Error())
		}
		ck, kk := serverCertKey(ref.Name), serverKeyKey(ref.Name)
		if i == 0 {
			ck, kk = KeyPublicCert, KeyPrivateKey
		}
		a.put(ref.Name, ck, cert)
		a.put(ref.Name, kk, key)
		if ca := s.Data[pemutil.KeyCA]; len(ca) > 0 {
			a.put(ref.Name, serverCAKey(ref.Name), ca)
		}
	}
	for i, ref := range os.Spec.Certificates.Client {
		field := fmt.Sprintf("spec.certificates.client[%d]", i)
		s, err := get(field, ref.Name)
		if err != nil {
			return nil, err
		}
		cert, key, _, err := pemutil.KeyPairFromSecret(s)
		if err != nil {
			return nil, newProblem(ReasonSecretMalformed, ref.Name, field, "client certificate: "+err.Error())
		}
		a.put(ref.Name, clientCertKey(ref.Name), cert)
		a.put(ref.Name, clientKeyKey(ref.Name), key)
	}
	for i, ref := range os.Spec.Certificates.TrustedCAs {
		field := fmt.Sprintf("spec.certificates.trustedCAs[%d]", i)
		s, err := get(field, ref.Name)
		if err != nil {
			return nil, err
		}
		cas, err := caCertificates(s)
		if err != nil {
			return nil, newProblem(ReasonSecretMalformed, ref.Name, field, "trusted CA: "+err.Error())
		}
		a.put(ref.Name, trustedCAKey(ref.Name), cas)
	}
	if len(operatorCA) > 0 {
		a.put("operator CA", KeyOperatorCA, operatorCA)
	}
	if a.bytes > maxSecretSize {
		return nil, a.tooLarge(os, "")
	}
	a.hash = contentHash(a.data)
	return a, nil
}

// maxSecretSize is the apiserver's limit on a Secret's data (keys and
// values); a larger generated Secret is refused, so it is never attempted.
const maxSecretSize = 1 << 20

// tooLarge is the refusal of an assembly over maxSecretSize; unread
// names the first reference left unread ("" when all were read).
func (a *assembly) tooLarge(os *v1.ObjectStore, unread string) error {
	size := fmt.Sprintf("%d bytes", a.bytes)
	if unread != "" {
		size = fmt.Sprintf("at least %d bytes (reading stopped before %s)", a.bytes, unread)
	}
	return newProblem(ReasonTooLarge, v1.GeneratedSecretName(os.Name), "", fmt.Sprintf("would hold %s, over the %d a Secret may hold; nothing was written. Biggest inputs: %s",
		size, maxSecretSize, a.biggest(3)))
}

// biggest names the n inputs that contribute most, with their sizes.
func (a *assembly) biggest(n int) string {
	keys := slices.SortedFunc(maps.Keys(a.data), func(x, y string) int { return len(a.data[y]) - len(a.data[x]) })
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%s (%d KiB)", k, (len(a.data[k])+1023)/1024))
	}
	return strings.Join(out, ", ")
}

func (a *assembly) put(source, key string, value []byte) {
	a.bytes += len(key) + len(value) - len(a.data[key])
	a.data[key] = value
	h := sha256.New()
	h.Write([]byte(a.sources[source]))
	h.Write([]byte(key))
	h.Write(value)
	a.sources[source] = hex.EncodeToString(h.Sum(nil))[:16]
}

// contentHash is a SHA-256 over the keys in order and their values,
// length-prefixed so no two layouts hash alike.
func contentHash(data map[string][]byte) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sourcesJSON is deterministic: encoding/json sorts map keys.
func (a *assembly) sourcesJSON() string {
	b, err := json.Marshal(a.sources)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// changedSources names the inputs whose contribution differs from the
// record on the previous generated Secret.
func changedSources(previousJSON string, now map[string]string) []string {
	var before map[string]string
	_ = json.Unmarshal([]byte(previousJSON), &before)
	var out []string
	for k, v := range now {
		if before[k] != v {
			out = append(out, k)
		}
	}
	for k := range before {
		if _, ok := now[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// caCertificates concatenates every certificate in ca.crt, public.crt and
// tls.crt; anything else in those keys makes the Secret malformed.
func caCertificates(s *corev1.Secret) ([]byte, error) {
	certs, problems := pemutil.Certificates(s)
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out, nil
}
