package updates

import (
	"fmt"
	"strings"
	"time"
)

// MinIO names a release after its build time: RELEASE.2006-01-02T15-04-05Z,
// optionally followed by a hotfix suffix. Its server info reports the same
// instant as RFC 3339.
const releaseLayout = "2006-01-02T15-04-05Z"

// releaseTime is the build time a release tag names.
func releaseTime(release string) (time.Time, error) {
	s, ok := strings.CutPrefix(release, "RELEASE.")
	if !ok {
		return time.Time{}, fmt.Errorf("release %q does not start with RELEASE.", release)
	}
	s, _, _ = strings.Cut(s, ".") // a hotfix suffix orders with its release
	t, err := time.Parse(releaseLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("release %q: %w", release, err)
	}
	return t, nil
}

// releaseOfVersion turns the version a MinIO server reports (RFC 3339, as
// stamped by cmd.Version) into its release tag.
func releaseOfVersion(version string) (string, error) {
	t, err := time.Parse(time.RFC3339, version)
	if err != nil {
		return "", fmt.Errorf("MinIO version %q is not a release time: %w", version, err)
	}
	return "RELEASE." + t.UTC().Format(releaseLayout), nil
}
