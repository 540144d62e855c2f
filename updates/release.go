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

// releaseTime is the build time a release tag names, read as MinIO reads
// it (releaseTagToReleaseTime): RELEASE.<time> and up to two more fields
// (a hotfix suffix), which order with the time.
func releaseTime(release string) (time.Time, error) {
	fields := strings.Split(release, ".")
	if len(fields) < 2 || len(fields) > 4 || fields[0] != "RELEASE" {
		return time.Time{}, fmt.Errorf("%q is not a MinIO release tag (RELEASE.<time>[.hotfix.<id>])", release)
	}
	t, err := time.Parse(releaseLayout, fields[1])
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

// sameRelease tells whether a node running release a runs b, as MinIO
// orders them: by release time alone, so a hotfix tag
// (RELEASE.<time>.hotfix.<id>) is the release of its time. MinIO reports
// only that time, and refuses an in-place update between two builds of it.
func sameRelease(a, b string) bool {
	ta, err1 := releaseTime(a)
	tb, err2 := releaseTime(b)
	if err1 != nil || err2 != nil {
		return a == b && a != ""
	}
	return ta.Equal(tb)
}
