package status

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSentencesJoinWithoutDoubledPunctuation(t *testing.T) {
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{"MethodNotAllowed: The specified method is not allowed against this resource.", "MinIO's own error is above"},
			"MethodNotAllowed: The specified method is not allowed against this resource. MinIO's own error is above"},
		{[]string{"a resource.. ", "see above."}, "a resource. See above"},
		{[]string{"no period", "then this"}, "no period. Then this"},
		{[]string{"ends with a semicolon;", "next"}, "ends with a semicolon. Next"},
		{[]string{"trailing newline.\n", "next"}, "trailing newline. Next"},
		{[]string{"", "only", "  ", "two"}, "only. Two"},
		{[]string{"release RELEASE.2026-02-20T10-00-00Z", "version 1.2 stays"}, "release RELEASE.2026-02-20T10-00-00Z. Version 1.2 stays"},
		{[]string{"x", "éclair"}, "x. Éclair"},
		{[]string{"x", "123 first"}, "x. 123 first"},
		{nil, ""},
	} {
		assert.Equal(t, tc.want, Sentences(tc.parts...), "%q", tc.parts)
	}
	assert.Equal(t, "waiting for x; the window opens at 02:00", Clauses("waiting for x.", "the window opens at 02:00."))
}
