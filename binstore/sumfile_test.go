package binstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

const goodDigest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseSHA256Sum(t *testing.T) {
	tests := []struct {
		name, in, wantName, wantErr string
	}{
		{name: "sha256sum output", in: goodDigest + "  minio.RELEASE.2025-04-08T15-41-24Z\n", wantName: "minio.RELEASE.2025-04-08T15-41-24Z"},
		{name: "upper-case hex is accepted", in: strings.ToUpper(goodDigest) + " minio.RELEASE.X", wantName: "minio.RELEASE.X"},
		{name: "hotfix release", in: goodDigest + " minio.RELEASE.2025-04-08T15-41-24Z.hotfix.1a2b3c", wantName: "minio.RELEASE.2025-04-08T15-41-24Z.hotfix.1a2b3c"},
		{name: "one field", in: goodDigest, wantErr: "want 2 fields"},
		{name: "three fields", in: goodDigest + " minio.RELEASE.X extra", wantErr: "found 3"},
		{name: "binary-mode star breaks MinIO's client", in: goodDigest + " *minio.RELEASE.X", wantErr: `does not start with "minio."`},
		{name: "short digest", in: goodDigest[:60] + " minio.RELEASE.X", wantErr: "not a hex SHA-256"},
		{name: "not hex", in: strings.Repeat("z", 64) + " minio.RELEASE.X", wantErr: "not a hex SHA-256"},
		{name: "other program", in: goodDigest + " mc.RELEASE.X", wantErr: `does not start with "minio."`},
		{name: "path in name", in: goodDigest + " minio.RELEASE.X/../../etc/passwd", wantErr: "not a plain file name"},
		{name: "empty", in: "", wantErr: "found 0"},
		{name: "huge", in: strings.Repeat(" ", 5000), wantErr: "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			digest, name, err := ParseSHA256Sum([]byte(tt.in))
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, goodDigest, digest)
			assert.Equal(t, tt.wantName, name)
		})
	}
}

func FuzzParseSHA256Sum(f *testing.F) {
	f.Add([]byte(goodDigest + "  minio.RELEASE.2025-04-08T15-41-24Z\n"))
	f.Add([]byte(goodDigest + " *minio.RELEASE.X"))
	f.Add([]byte("\x00\xff minio."))
	f.Fuzz(func(t *testing.T, data []byte) {
		digest, name, err := ParseSHA256Sum(data)
		if err != nil {
			return
		}
		if len(digest) != 64 || !strings.HasPrefix(name, "minio.") || !ValidFileName(name) {
			t.Fatalf("accepted %q -> %q %q", data, digest, name)
		}
	})
}
