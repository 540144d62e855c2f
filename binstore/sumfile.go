package binstore

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// maxSumFileSize bounds what is read of a .sha256sum file; a real one is
// about 110 bytes.
const maxSumFileSize = 4096

// ParseSHA256Sum parses a MinIO .sha256sum file the way MinIO's in-place
// update client does: exactly two whitespace-separated fields, the
// lower-case hex SHA-256 of the binary and the binary's file name, which
// starts with "minio.". It returns the digest and the name.
func ParseSHA256Sum(data []byte) (digest, name string, err error) {
	if len(data) > maxSumFileSize {
		return "", "", fmt.Errorf("%d bytes, more than the %d a checksum file can hold", len(data), maxSumFileSize)
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return "", "", fmt.Errorf("want 2 fields (\"<sha256>  minio.<RELEASE>\"), found %d", len(fields))
	}
	digest, name = strings.ToLower(fields[0]), fields[1]
	raw, err := hex.DecodeString(digest)
	if err != nil || len(raw) != 32 {
		return "", "", fmt.Errorf("first field %q is not a hex SHA-256 digest", truncate(fields[0], 80))
	}
	if !strings.HasPrefix(name, "minio.") {
		return "", "", fmt.Errorf("second field %q does not start with \"minio.\"", truncate(name, 80))
	}
	if !ValidFileName(name) {
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

// ValidFileName accepts the names the store serves: letters, digits, '.',
// '_' and '-', not starting with a dot. Anything else (separators, "..",
// NUL, percent signs, spaces) is never a store file.
func ValidFileName(name string) bool {
	if name == "" || len(name) > 255 || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return !strings.Contains(name, "..")
}

// ValidPlatform accepts "<os>-<arch>" directory names such as linux-amd64.
func ValidPlatform(p string) bool {
	os, arch, ok := strings.Cut(p, "-")
	return ok && lowerAlnum(os) && lowerAlnum(arch)
}

func lowerAlnum(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
