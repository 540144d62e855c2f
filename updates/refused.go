package updates

import (
	"net/url"
	"strings"
)

// Our own refusal is never the tenant's failure: when the upgrade server
// answered MinIO's download with 503 (its limits), closed the connection
// (its connection limits, a download below the minimum rate, a shutdown)
// or was not there at all, MinIO fails the update, but nothing is wrong
// with the tenant or the release. Such a failure is retried later, never
// rolled and never counted against the release's failure budget
// (follow).
//
// What MinIO says when it cannot fetch from the upgrade server
// (cmd/update.go): "Error downloading URL <url>. Response: 503 Service
// Unavailable" for the .sha256sum and each node's .minisig; Go's
// `Get "<url>": EOF` (or "connection reset by peer", "connection
// refused") when the connection is closed before an answer; and a bare
// "unexpected EOF" or "connection reset by peer" when the binary's stream
// is cut (MinIO reads no other stream before it answers). A tenant can
// make its own failure read like this; it then only delays its own
// update, within the update's timeout like any other (retryLater).

// transportFailures are Go's words for a connection that ended under a
// read.
var transportFailures = []string{"unexpected eof", "connection reset by peer", "broken pipe", "connection refused", ": eof", "server closed"}

// downloadRefused reports whether MinIO's error msg says it could not
// fetch the release from the upgrade server at updateURL. whole is true
// for the call's own error (MinIO had read nothing but our files when it
// answered), false for one node's.
func downloadRefused(msg, updateURL string, whole bool) bool {
	u, err := url.Parse(updateURL)
	if err != nil || u.Host == "" {
		return false
	}
	lower := strings.ToLower(msg)
	transport := false
	for _, s := range transportFailures {
		if strings.Contains(lower, s) {
			transport = true
			break
		}
	}
	ours := strings.Contains(msg, u.Host)
	switch {
	case ours && strings.Contains(msg, "Response: 5"):
		return true
	case ours && transport:
		return true
	default:
		// The binary's stream cut short names no URL: only the words Go
		// has for a stream cut, in the call's own error (MinIO reads no
		// other stream before it answers).
		return whole && (strings.Contains(lower, "unexpected eof") || strings.Contains(lower, "connection reset by peer"))
	}
}
