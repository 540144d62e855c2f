package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// helmBinary is the helm the chart tests run: $OSOP_BIN_DIR/helm or
// bin/helm when make tools built it, else the one builtHelm builds, so
// `go test ./cmd/operator` passes on a fresh clone before make tools.
func helmBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("OSOP_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin")
	}
	if p := filepath.Join(dir, "helm"); fileExists(p) {
		return p
	}
	p, err := builtHelm()
	require.NoError(t, err, "helm is built by make tools into bin/, or by the test from hack/tools")
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// builtHelm builds helm from the module hack/tools pins, as
// hack/build-tools.sh does, once per test binary, into the user's cache
// under the pin's hash: the next run, and the next clone, reuse it until
// the pin changes. The first build takes a minute on 2 cores with Go's
// module and build caches warm (make tools fills them).
var builtHelm = sync.OnceValues(func() (string, error) {
	tools := filepath.Join("..", "..", "hack", "tools")
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(tools, f))
		if err != nil {
			return "", fmt.Errorf("read the tools pin: %w", err)
		}
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "object-store-operator", "helm-"+hex.EncodeToString(h.Sum(nil))[:16])
	p := filepath.Join(dir, "helm")
	if fileExists(p) {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("helm cache: %w", err)
	}
	// Built beside its final name and renamed, so a build cut short
	// leaves no helm behind that the next run would take as whole.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("helm cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(tmp, "helm"), "helm.sh/helm/v3/cmd/helm")
	cmd.Dir = tools
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build helm from %s: %w: %s", tools, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), p); err != nil {
		return "", fmt.Errorf("helm cache: %w", err)
	}
	return p, nil
})
