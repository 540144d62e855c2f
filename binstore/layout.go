package binstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// interrupted landing (".minio.*.tmp"), and lock files a crashed holder
// left (".minio.*.lock"). A temporary whose release is locked belongs to a
// landing in progress (this process's or, on a shared volume, another's)
// and is left alone, and so is a held lock.
func (s *Store) RemoveStaleTemporaries() {
	for _, dir := range s.platformDirs() {
		locks, _ := filepath.Glob(filepath.Join(s.dir, dir, ".*.lock"))
		for _, l := range locks {
			if unlock, err := s.tryLockFile(filepath.Join(s.dir, dir), filepath.Base(l)); err == nil {
				unlock() // which removes the file
			}
		}
		matches, _ := filepath.Glob(filepath.Join(s.dir, dir, ".minio.*.tmp"))
		for _, m := range matches {
			release := temporaryRelease(filepath.Base(m))
			unlock, err := s.tryLock(dir, release)
			if err != nil {
				continue
			}
			// A binary being staged is locked by its writer (see Stage):
			// pulls stream without the release's lock.
			if f, err := os.Open(m); err == nil {
				if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
					if err := os.Remove(m); err == nil {
						s.log.Info().Str("file", m).Msg("removed a partial download left by an interrupted pull")
					}
				}
				f.Close()
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
//
// Hold it only to compare and land, never while a registry streams: release
// names come from tenants' images, so any tenant can claim another's
// release, and a slow registry would hold the other tenant's landing up.
func (s *Store) Lock(ctx context.Context, platform, release string) (func(), error) {
	return s.wait(ctx, "another process landing "+platform+"/minio."+release, func() (func(), error) { return s.tryLock(platform, release) })
}

// LockSource serializes pulls of one source (a registry and manifest
// digest, or a mirror URL) for one platform across every process sharing
// the directory, so replicas on one volume pull it once: the others wait
// and find it landed. Only pulls of the very same source wait for each
// other. It waits until ctx ends; the returned function releases it.
func (s *Store) LockSource(ctx context.Context, platform, source string) (func(), error) {
	if !ValidPlatform(platform) {
		return nil, fmt.Errorf("not a platform directory: %q", platform)
	}
	dir := filepath.Join(s.dir, platform)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	sum := sha256.Sum256([]byte(source))
	file := ".pull-" + hex.EncodeToString(sum[:16]) + ".lock"
	return s.wait(ctx, "another process pulling "+source+" for "+platform, func() (func(), error) { return s.tryLockFile(dir, file) })
}

// wait polls try until it takes the lock or ctx ends.
func (s *Store) wait(ctx context.Context, what string, try func() (func(), error)) (func(), error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		unlock, err := try()
		if !errors.Is(err, errLocked) {
			return unlock, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

var errLocked = errors.New("locked by another holder")

// tryLock takes the release's lock if it is free, else returns errLocked.
// flock(2) locks belong to the open file, so two holders in one process
// exclude each other as two processes do.
//
// The lock file exists only while the lock is held: release names come
// from tenants' images, and a file per name ever seen would pile up. The
// holder removes it before unlocking, so a waiter may lock a file that is
// no longer the one at the path; it then sees a different file (or none)
// there and tries again, and only a lock on the file at the path counts.
func (s *Store) tryLock(platform, release string) (func(), error) {
	dir, name, err := s.prepare(platform, release)
	if err != nil {
		return nil, err
	}
	return s.tryLockFile(dir, "."+name+".lock")
}

// tryLockFile is tryLock of the lock file named file in dir.
func (s *Store) tryLockFile(dir, file string) (func(), error) {
	path := filepath.Join(dir, file)
	name := strings.TrimSuffix(strings.TrimPrefix(file, "."), ".lock")
	platform := filepath.Base(dir)
	for range 100 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
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
		locked, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("stat lock for %s/%s: %w", platform, name, err)
		}
		if atPath, err := os.Stat(path); err != nil || !os.SameFile(locked, atPath) {
			f.Close() // a released holder removed it meanwhile
			continue
		}
		return func() {
			_ = os.Remove(path)
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		}, nil
	}
	return nil, errLocked
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
