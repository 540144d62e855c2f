package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MinIOReleases are the two plain releases `make tools` builds from the
// pinned MinIO module (hack/minio/releases), older first.
func MinIOReleases() (older, newer string, err error) {
	rs, hotfix, err := minioReleases()
	if err != nil {
		return "", "", err
	}
	if len(rs) != 2 || hotfix == "" {
		return "", "", errors.New("hack/minio/releases must name two releases and a hotfix")
	}
	return rs[0], rs[1], nil
}

// MinIOHotfixRelease is the hotfix release `make tools` builds: a tag
// RELEASE.<time>.hotfix.<id>, newer than both plain releases.
func MinIOHotfixRelease() (string, error) {
	_, hotfix, err := minioReleases()
	if err == nil && hotfix == "" {
		err = errors.New("hack/minio/releases names no hotfix release")
	}
	return hotfix, err
}

func minioReleases() (plain []string, hotfix string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "hack", "minio", "releases"))
	if err != nil {
		return nil, "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		switch l = strings.TrimSpace(l); {
		case strings.Contains(l, ".hotfix."):
			hotfix = l
		case strings.HasPrefix(l, "RELEASE."):
			plain = append(plain, l)
		}
	}
	return plain, hotfix, nil
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
