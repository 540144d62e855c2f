package binstore

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Suffixes of a binary's sidecar files. The provenance file is the
// store's own record and is never served.
const (
	SHA256SumSuffix = ".sha256sum"
	MinisigSuffix   = ".minisig"
	sourceSuffix    = ".source.json"
)

// digestDirName is the directory of a platform holding one directory per
// binary, named after its SHA-256: <os>-<arch>/sha256/<hex>/minio.<RELEASE>.
// Every release name of one binary there is a hard link to one file: the
// release names are the store's labels of the bytes, and MinIO's client
// reads the binary under the name its .sha256sum gives.
const digestDirName = "sha256"

// DigestPath is where a binary is served by its bytes, below the update
// path: sha256/<hex>/minio.<RELEASE>. MinIO's update client reads the
// .sha256sum there, then the binary and its .minisig beside it.
func DigestPath(digest, release string) string {
	return digestDirName + "/" + digest + "/minio." + release
}

// ValidDigest reports whether d is a lower-case hex SHA-256, the only
// form a digest path (and a tenant's component) takes.
func ValidDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if c := d[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

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

// isBinaryName tells MinIO binaries from their sidecars and from anything
// else that may sit in the directory (hidden temporary files among them).
func isBinaryName(name string) bool {
	return strings.HasPrefix(name, "minio.") && ValidFileName(name) &&
		!strings.HasSuffix(name, SHA256SumSuffix) && !strings.HasSuffix(name, MinisigSuffix) &&
		!strings.HasSuffix(name, sourceSuffix)
}

// RemoveBinary deletes one indexed binary and its sidecars, the
// .sha256sum first, and its digest directory once empty; other release
// names of the same bytes (hard links) stay. A tenant's view is only
// dropped from the index (it has no files), and so are the views of a
// removed file.
func (s *Store) RemoveBinary(b *Binary) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.component == "" {
		base := filepath.Join(s.dir, filepath.FromSlash(b.Path()))
		for _, p := range []string{base + SHA256SumSuffix, base, base + MinisigSuffix, base + sourceSuffix} {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("remove %s: %w", p, err)
			}
		}
		if b.inDigestDir() {
			_ = os.Remove(filepath.Dir(base)) // fails while other names remain
		}
	}
	s.change(func(all []*Binary) []*Binary {
		return slices.DeleteFunc(all, func(o *Binary) bool {
			return o == b || (b.component == "" && o.rel == b.rel)
		})
	})
	return nil
}

// prepare checks a platform and release and creates the platform's
// directory; it returns the directory and the binary's file name.
func (s *Store) prepare(platform, release string) (dir, name string, err error) {
	if name, err = BinaryName(release); err != nil {
		return "", "", err
	}
	if !ValidPlatform(platform) {
		return "", "", fmt.Errorf("not a platform directory: %q", platform)
	}
	dir = filepath.Join(s.dir, platform)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("create %s: %w", dir, err)
	}
	return dir, name, nil
}
