package binstore

import (
	"errors"
	"fmt"
	"strings"
)

// Suffixes of a binary's sidecar files; the provenance is never served.
const (
	SHA256SumSuffix = ".sha256sum"
	MinisigSuffix   = ".minisig"
	sourceSuffix    = ".source.json"
)

// digestDirName holds one directory per binary named after its SHA-256:
// <os>-<arch>/sha256/<hex>/minio.<RELEASE>. Each release name of one
// binary is a hard link there, since MinIO's client reads the binary under
// the name its .sha256sum gives.
const digestDirName = "sha256"

// maxSumFileSize bounds a .sha256sum file; a real one is about 110 bytes.
const maxSumFileSize = 4096

const (
	lowerHex   = "0123456789abcdef"
	lowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// DigestPath is where a binary is served by its bytes, below the update
// path: sha256/<hex>/minio.<RELEASE>.
func DigestPath(digest, release string) string {
	return digestDirName + "/" + digest + "/minio." + release
}

// ValidDigest reports whether d is a lower-case hex SHA-256.
func ValidDigest(d string) bool { return len(d) == 64 && strings.Trim(d, lowerHex) == "" }

// ValidFileName accepts the names the store serves: letters, digits, '.',
// '_' and '-', not starting with a dot (no separators, "..", NUL, '%').
func ValidFileName(name string) bool {
	return name != "" && len(name) <= 255 && name[0] != '.' && !strings.Contains(name, "..") &&
		strings.Trim(name, lowerAlnum+"ABCDEFGHIJKLMNOPQRSTUVWXYZ._-") == ""
}

// ValidPlatform accepts "<os>-<arch>" directory names such as linux-amd64.
func ValidPlatform(p string) bool {
	os, arch, ok := strings.Cut(p, "-")
	word := func(s string) bool { return s != "" && len(s) <= 32 && strings.Trim(s, lowerAlnum) == "" }
	return ok && word(os) && word(arch)
}

// PlatformDir is the store subdirectory for a platform, e.g. linux-amd64.
func PlatformDir(os, arch string) string { return os + "-" + arch }

// BinaryName returns the file name of a release's binary, minio.<release>.
func BinaryName(release string) (string, error) {
	name := "minio." + release
	if !isBinaryName(name) {
		return "", fmt.Errorf("release %q does not make a valid binary file name", release)
	}
	return name, nil
}

// isBinaryName tells MinIO binaries from their sidecars and anything else
// in the directory (hidden temporary files among them).
func isBinaryName(name string) bool {
	return strings.HasPrefix(name, "minio.") && ValidFileName(name) &&
		!strings.HasSuffix(name, SHA256SumSuffix) && !strings.HasSuffix(name, MinisigSuffix) &&
		!strings.HasSuffix(name, sourceSuffix)
}

// SHA256SumFile renders a .sha256sum file the way MinIO's client reads it.
func SHA256SumFile(digest, name string) []byte {
	return []byte(digest + "  " + name + "\n")
}

// ParseSHA256Sum parses a .sha256sum file as MinIO's update client does:
// exactly two fields, the hex SHA-256 and a file name "minio.*". The
// digest is returned in lower case.
func ParseSHA256Sum(data []byte) (digest, name string, err error) {
	if len(data) > maxSumFileSize {
		return "", "", fmt.Errorf("%d bytes, more than the %d a checksum file can hold", len(data), maxSumFileSize)
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return "", "", fmt.Errorf("want 2 fields (\"<sha256>  minio.<RELEASE>\"), found %d", len(fields))
	}
	digest, name = strings.ToLower(fields[0]), fields[1]
	switch {
	case !ValidDigest(digest):
		return "", "", fmt.Errorf("first field %q is not a hex SHA-256 digest", truncate(fields[0], 80))
	case !strings.HasPrefix(name, "minio."):
		return "", "", fmt.Errorf("second field %q does not start with \"minio.\"", truncate(name, 80))
	case !ValidFileName(name):
		return "", "", errors.New("second field is not a plain file name")
	}
	return digest, name, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
