package binsource

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/object-store-operator/operator/upgradeserver"
)

// errTooLarge means a binary exceeded the size bound.
var errTooLarge = errors.New("binary larger than OPERATOR_MAX_BINARY_SIZE")

// landing streams one binary into a hidden temporary file in its platform
// directory; commit checks it and renames it into place. The store ignores
// hidden files and lists a binary only once its .sha256sum (written last)
// matches, so a crash or a bad image never shows up in the listing.
type landing struct {
	dir  string
	name string
	tmp  *os.File
	hash io.Writer
	sum  func() []byte
	n    int64
	max  int64
}

func newLanding(storeDir, platform, name string, max int64) (*landing, error) {
	dir := filepath.Join(storeDir, platform)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("create temporary file in %s: %w", dir, err)
	}
	h := sha256.New()
	return &landing{dir: dir, name: name, tmp: tmp, hash: h, sum: func() []byte { return h.Sum(nil) }, max: max}, nil
}

func (l *landing) Write(p []byte) (int, error) {
	if l.n+int64(len(p)) > l.max {
		return 0, fmt.Errorf("%w (%d bytes)", errTooLarge, l.max)
	}
	n, err := l.tmp.Write(p)
	l.hash.Write(p[:n])
	l.n += int64(n)
	return n, err
}

// abort removes the temporary file.
func (l *landing) abort() {
	l.tmp.Close()
	os.Remove(l.tmp.Name())
}

// commit verifies the bytes against want (hex SHA-256; empty: none given)
// and lands binary, .minisig and, last, .sha256sum. It returns the digest.
func (l *landing) commit(want string, sig []byte) (string, error) {
	digest := hex.EncodeToString(l.sum())
	if want != "" && want != digest {
		l.abort()
		return "", fmt.Errorf("%w: the image's checksum file says %s, the binary has %s", errChecksum, want, digest)
	}
	if err := l.tmp.Chmod(0o755); err != nil {
		l.abort()
		return "", fmt.Errorf("chmod %s: %w", l.tmp.Name(), err)
	}
	if err := l.tmp.Sync(); err != nil {
		l.abort()
		return "", fmt.Errorf("sync %s: %w", l.tmp.Name(), err)
	}
	if err := l.tmp.Close(); err != nil {
		os.Remove(l.tmp.Name())
		return "", fmt.Errorf("close %s: %w", l.tmp.Name(), err)
	}
	final := filepath.Join(l.dir, l.name)
	// A stale checksum of an earlier attempt must not pair with new bytes.
	if err := os.Remove(final + upgradeserver.SHA256SumSuffix); err != nil && !os.IsNotExist(err) {
		os.Remove(l.tmp.Name())
		return "", fmt.Errorf("remove old checksum: %w", err)
	}
	if err := os.Rename(l.tmp.Name(), final); err != nil {
		os.Remove(l.tmp.Name())
		return "", fmt.Errorf("rename into %s: %w", final, err)
	}
	if len(sig) > 0 {
		if err := writeAtomic(l.dir, l.name+upgradeserver.MinisigSuffix, sig); err != nil {
			return "", err
		}
	}
	if err := writeAtomic(l.dir, l.name+upgradeserver.SHA256SumSuffix, upgradeserver.SHA256SumFile(digest, l.name)); err != nil {
		return "", err
	}
	if d, err := os.Open(l.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return digest, nil
}

func writeAtomic(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", name, err)
	}
	if _, err := tmp.Write(data); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
