package binsource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
)

// Manifests and configs are read whole, so they are capped here:
// go-containerregistry reads a manifest of up to 100 MiB and a config of
// any size declared. Registries accept manifests of at least 4 MiB (OCI
// distribution spec); MinIO's are a few KiB.
const (
	maxManifestSize = 4 << 20
	maxConfigSize   = 4 << 20
)

// What a manifest may hold, counted before it is decoded: 4 MiB of "{},"
// is 1.4 million descriptors, about 480 MiB decoded.
const (
	maxManifestArray  = 1024    // elements of any one array (manifests, layers, ...)
	maxManifestValues = 1 << 16 // JSON values of the whole document
	maxManifestDepth  = 32
)

// boundedManifests caps manifest responses at maxManifestSize, refusing a
// larger Content-Length before any byte is read.
func boundedManifests(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		orig := originalRequest(req) // redirected, still a manifest
		if err != nil || !strings.Contains(orig.URL.Path, "/manifests/") {
			return resp, err
		}
		what := "the manifest at " + bounded(orig.URL.Host+orig.URL.Path, 512)
		if resp.ContentLength > maxManifestSize {
			resp.Body.Close()
			return nil, reasonf(errImageTooLarge, "%s is %d bytes; at most %d are read", what, resp.ContentLength, maxManifestSize)
		}
		capped := http.MaxBytesReader(nil, resp.Body, maxManifestSize)
		if resp.StatusCode != http.StatusOK || req.Method == http.MethodHead { // errors: 64 KiB read
			resp.Body = capped
			return resp, nil
		}
		// Read whole (as go-containerregistry would) to count it before decoding.
		body, err := io.ReadAll(capped)
		resp.Body.Close()
		if errors.As(err, new(*http.MaxBytesError)) {
			err = reasonf(errImageTooLarge, "%s is larger than %d bytes", what, maxManifestSize)
		}
		if err == nil {
			err = checkManifestShape(body, what)
		}
		if err != nil {
			return nil, err
		}
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		return resp, nil
	})
}

// checkManifestShape refuses a manifest whose arrays, values or nesting
// exceed what one of MinIO's could hold, streaming tokens and holding
// nothing but the nesting. Malformed JSON is left to the parser.
func checkManifestShape(body []byte, what string) error {
	type level struct {
		array     bool
		key       string // the object key the container is the value of
		elements  int
		expectKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []level
	values := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // not JSON: the manifest parser says what is wrong
		}
		var top *level
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		key := ""
		if top != nil && !top.array {
			if top.expectKey {
				top.key, top.expectKey = tok.(string), false
				continue
			}
			top.expectKey = true
			key = top.key
		}
		if values++; values > maxManifestValues {
			return reasonf(errImageTooLarge, "%s holds more than %d JSON values", what, maxManifestValues)
		}
		if top != nil && top.array {
			key = top.key
			if top.elements++; top.elements > maxManifestArray {
				return reasonf(errImageTooLarge, "%s lists more than %d %s", what, maxManifestArray, bounded(fmt.Sprintf("%q entries", key), 80))
			}
		}
		if d, ok := tok.(json.Delim); ok {
			if len(stack) >= maxManifestDepth {
				return reasonf(errImageTooLarge, "%s nests deeper than %d levels", what, maxManifestDepth)
			}
			stack = append(stack, level{array: d == '[', key: key, expectKey: d == '{'})
		}
	}
}

// configFile reads the image's config, refusing one too large or of
// undeclared size before a byte of it is read.
func configFile(img ggcrv1.Image) (*ggcrv1.ConfigFile, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, classify("read manifest", err)
	}
	if m.Config.Data == nil && (m.Config.Size < 0 || m.Config.Size > maxConfigSize) {
		return nil, reasonf(errImageTooLarge, "the image config %s declares %d bytes; at most %d are read", m.Config.Digest, m.Config.Size, maxConfigSize)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, classify("read image config", err)
	}
	return cfg, nil
}
