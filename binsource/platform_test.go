package binsource

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
)

// TestBinaryStatusIsThePlatformOfTheTenantsPods: status.binary names the
// binary for the platform the tenant's pods run on; an image without it
// (without any of them, for a tenant on several) is BinaryAvailable=False
// naming the platform.
func TestBinaryStatusIsThePlatformOfTheTenantsPods(t *testing.T) {
	const rel = "RELEASE.2026-02-20T10-00-00Z"
	amd := &binstore.Binary{Release: rel, Platform: "linux-amd64", SHA256: strings.Repeat("a", 64)}
	arm := &binstore.Binary{Release: rel, Platform: "linux-arm64", SHA256: strings.Repeat("b", 64)}
	both := &Result{Release: rel, Platforms: []string{"linux/amd64", "linux/arm64"}, Binaries: []*binstore.Binary{amd, arm}}
	armOnly := &Result{Release: rel, Platforms: []string{"linux/arm64"}, Binaries: []*binstore.Binary{arm}}
	c := &Controller{cfg: ControllerConfig{UpdateURL: "https://op:4221/webhook/v1/update"}}
	for _, tc := range []struct {
		name      string
		res       *Result
		platforms []string
		want      *binstore.Binary
	}{
		{name: "no platforms known: linux/amd64", res: both, want: amd},
		{name: "no platforms known, no amd64 in the image: the first", res: armOnly, want: arm},
		{name: "pods on arm64: the arm64 binary", res: both, platforms: []string{"linux/arm64"}, want: arm},
		{name: "pods on amd64: the amd64 binary", res: both, platforms: []string{"linux/amd64"}, want: amd},
		{name: "mixed: the first platform's", res: both, platforms: []string{"linux/amd64", "linux/arm64"}, want: amd},
		{name: "mixed: the first platform the image holds", res: armOnly, platforms: []string{"linux/amd64", "linux/arm64"}, want: arm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own, err := ownBinary(tc.res.Binaries, tc.platforms, tc.res)
			require.NoError(t, err)
			st := c.binaryStatus("registry.example/minio:x", own)
			assert.Equal(t, "registry.example/minio:x", st.Image, "the image it was resolved from")
			assert.Equal(t, tc.want.SHA256, st.SHA256)
			assert.Equal(t, tc.want.Platform, st.Platform)
			assert.Equal(t, "https://op:4221/webhook/v1/update/"+tc.want.DigestPath()+binstore.SHA256SumSuffix, st.URL)
		})
	}
	for _, platforms := range [][]string{{"linux/amd64"}, {"linux/amd64", "linux/s390x"}, {"linux/s390x"}} {
		_, err := ownBinary(armOnly.Binaries, platforms, armOnly)
		require.Error(t, err, "%v", platforms)
		assert.Equal(t, "NoBinaryForPlatform", reasonOf(err))
		assert.Contains(t, err.Error(), "has no binary for "+platforms[0])
	}
}
