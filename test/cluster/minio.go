package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MinIOReleases are the two releases `make tools` builds from the pinned
// MinIO module (hack/minio/releases), older first.
func MinIOReleases() (older, newer string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "hack", "minio", "releases"))
	if err != nil {
		return "", "", err
	}
	var rs []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "RELEASE.") {
			rs = append(rs, l)
		}
	}
	if len(rs) != 2 {
		return "", "", errors.New("hack/minio/releases must name two releases")
	}
	return rs[0], rs[1], nil
}

// MinIOBinary is bin/minio.<release>, built by `make tools`.
func MinIOBinary(release string) (string, error) {
	bin, err := BinDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(bin, "minio."+release)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("MinIO %s (run `make tools`): %w", release, err)
	}
	return p, nil
}

// InstallMinIO copies the binary of release to dir/minio and returns its
// path: MinIO replaces its own binary in place, so each node needs a copy
// in a directory it may write.
func InstallMinIO(release, dir string) (string, error) {
	src, err := MinIOBinary(release)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	dst := filepath.Join(dir, "minio")
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	return dst, out.Close()
}

// MinIOCertsDir lays a generated mount Secret's data out as MinIO's certs
// directory (docs/mount-secret.md): public.crt, private.key and CAs/<name>
// for every CAs.<name> key. It returns the path of each file relative to
// the certs directory.
func MinIOCertsDir(data map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range data {
		switch {
		case k == "public.crt" || k == "private.key":
			out[k] = v
		case strings.HasPrefix(k, "CAs."):
			out["CAs/"+strings.TrimPrefix(k, "CAs.")] = v
		}
	}
	return out
}
