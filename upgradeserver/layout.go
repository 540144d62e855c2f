package upgradeserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Suffixes of a binary's sidecar files.
const (
	SHA256SumSuffix = sumSuffix
	MinisigSuffix   = sigSuffix
)

// BinaryName returns the file name of a release's binary, minio.<release>,
// or an error if the release cannot be a plain file name.
func BinaryName(release string) (string, error) {
	name := "minio." + release
	if !isBinaryName(name) {
		return "", fmt.Errorf("release %q does not make a valid binary file name", release)
	}
	return name, nil
}

// SHA256SumFile renders a .sha256sum file the way MinIO's client reads it.
func SHA256SumFile(digest, name string) []byte {
	return []byte(digest + "  " + name + "\n")
}

// PlatformDir is the store subdirectory for a platform, e.g. linux-amd64.
func PlatformDir(os, arch string) string { return os + "-" + arch }

// Has reports whether the store lists the binary name under platform.
func (s *Store) Has(platform, name string) bool {
	idx := s.current.Load()
	if idx == nil {
		return false
	}
	ref, ok := idx.files[platform+"/"+name]
	return ok && ref.kind == kindBinary
}

// Remove deletes a binary and its sidecars, the .sha256sum first so the
// binary is never listed without it, and re-indexes.
func (s *Store) Remove(platform, name string) error {
	if !validPlatform(platform) || !isBinaryName(name) {
		return fmt.Errorf("not a store binary: %s/%s", platform, name)
	}
	base := filepath.Join(s.dir, platform, name)
	for _, p := range []string{base + sumSuffix, base, base + sigSuffix} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	s.Scan()
	return nil
}

// RemoveStaleTemporaries deletes hidden temporary files left by an
// interrupted landing (".minio.*.tmp").
func (s *Store) RemoveStaleTemporaries() {
	for _, dir := range append([]string{"."}, s.platformDirs()...) {
		matches, _ := filepath.Glob(filepath.Join(s.dir, dir, ".minio.*.tmp"))
		for _, m := range matches {
			if strings.HasPrefix(filepath.Base(m), ".minio.") {
				if err := os.Remove(m); err == nil {
					s.log.Info().Str("file", m).Msg("removed a partial download left by an interrupted pull")
				}
			}
		}
	}
}
