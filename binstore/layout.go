package binstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
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
// Every release name of one binary there is a hard link to one file.
const digestDirName = "sha256"

// DigestPath is where a binary is served by its bytes, below the update
// path: sha256/<hex>/minio.<RELEASE>. MinIO's update client reads the
// .sha256sum there, then the binary and its .minisig beside it.
func DigestPath(digest, release string) string {
	return digestDirName + "/" + digest + "/minio." + release
}

// validDigest accepts a lower-case hex SHA-256.
func validDigest(d string) bool {
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

// ValidDigest reports whether d is a lower-case hex SHA-256, the only
// form a digest path takes.
func ValidDigest(d string) bool { return validDigest(d) }

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

// Remove deletes a binary and its sidecars, the .sha256sum first so the
// binary is never listed without it, and re-indexes.
func (s *Store) Remove(platform, name string) error {
	if !ValidPlatform(platform) || !isBinaryName(name) {
		return fmt.Errorf("not a store binary: %s/%s", platform, name)
	}
	base := filepath.Join(s.dir, platform, name)
	for _, p := range []string{base + SHA256SumSuffix, base, base + MinisigSuffix, base + sourceSuffix} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	s.Scan()
	return nil
}

// RemoveBinary deletes one indexed binary file and its sidecars, the
// .sha256sum first, and its digest directory once empty; other release
// names of the same bytes (hard links) stay. It re-indexes.
func (s *Store) RemoveBinary(b *Binary) error {
	base := filepath.Join(s.dir, filepath.FromSlash(b.Path()))
	for _, p := range []string{base + SHA256SumSuffix, base, base + MinisigSuffix, base + sourceSuffix} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	if b.inDigestDir() {
		_ = os.Remove(filepath.Dir(base)) // fails while other names remain
	}
	s.Scan()
	return nil
}

// RemoveStaleTemporaries deletes hidden temporary files left by an
// interrupted landing (".minio.*.tmp"). A temporary whose release is
// locked belongs to a landing in progress (this process's or, on a shared
// volume, another's) and is left alone.
func (s *Store) RemoveStaleTemporaries() {
	for _, dir := range s.platformDirs() {
		matches, _ := filepath.Glob(filepath.Join(s.dir, dir, ".minio.*.tmp"))
		for _, m := range matches {
			release := temporaryRelease(filepath.Base(m))
			unlock, err := s.tryLock(dir, release)
			if err != nil {
				continue
			}
			if err := os.Remove(m); err == nil {
				s.log.Info().Str("file", m).Msg("removed a partial download left by an interrupted pull")
			}
			unlock()
		}
	}
}

// temporaryRelease is the release a temporary file was written for:
// ".minio.<RELEASE>[.sidecar].<random>.tmp".
func temporaryRelease(tmp string) string {
	name := strings.TrimSuffix(strings.TrimPrefix(tmp, "."), ".tmp")
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		name = name[:i]
	}
	for _, suffix := range []string{SHA256SumSuffix, MinisigSuffix, sourceSuffix} {
		name = strings.TrimSuffix(name, suffix)
	}
	return strings.TrimPrefix(name, "minio.")
}

// Lock serializes work on one release of one platform across every process
// sharing the directory (a ReadWriteMany volume): while it is held, no other
// process lands or compares that release. It waits until ctx ends; the
// returned function releases it. A crashed holder's lock goes with its
// process.
func (s *Store) Lock(ctx context.Context, platform, release string) (func(), error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		unlock, err := s.tryLock(platform, release)
		if !errors.Is(err, errLocked) {
			return unlock, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for another process landing %s/minio.%s: %w", platform, release, ctx.Err())
		case <-tick.C:
		}
	}
}

var errLocked = errors.New("locked by another holder")

// tryLock takes the release's lock if it is free, else returns errLocked.
// flock(2) locks belong to the open file, so two holders in one process
// exclude each other as two processes do.
func (s *Store) tryLock(platform, release string) (func(), error) {
	dir, name, err := s.prepare(platform, release)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "."+name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock for %s/%s: %w", platform, name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("lock %s/%s: %w", platform, name, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
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
