package reason

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSpellNamesSettingsAsTheOperatorDoes(t *testing.T) {
	spell := func(flag string) (string, bool) {
		if flag == "pull-timeout" {
			return "OPERATOR_PULL_TIMEOUT", true
		}
		return "", false
	}
	set, err := Spell([]Reason{
		{Name: "PullTimeout", Severity: Warning, Remedy: "raise {pull-timeout}"},
		{Name: "Available", Severity: Normal},
	}, spell)
	require.NoError(t, err)
	assert.Equal(t, "raise OPERATOR_PULL_TIMEOUT", set.Remedy("PullTimeout"))
	assert.Equal(t, Normal, set.Severity("Available"))
	assert.Equal(t, Warning, set.Severity("NeverDeclared"), "nothing unknown is reported as fine")
	assert.Empty(t, Set(nil).Remedy("PullTimeout"))

	_, err = Spell([]Reason{
		{Name: "A", Severity: Warning, Remedy: "set {gone}"},
		{Name: "B", Severity: "Info"},
		{Name: "B", Severity: Normal},
	}, spell)
	assert.EqualError(t, err, `reasons: A: remedy names unknown setting {gone}; B declared twice; B: severity "Info"`)
}

// TestAnErrorCarriesTheReasonFoundNearestTheFailure: the one error type
// that carries a reason. Wrapping keeps an inner reason (the more
// specific); a sentinel matches any Error of its reason; the message, when
// set, is what is shown, the cause staying reachable.
func TestAnErrorCarriesTheReasonFoundNearestTheFailure(t *testing.T) {
	refused := Errorf("EndpointNotAllowed", "dial %s: refused by policy", "10.0.0.1")
	err := Wrap("TenantUnreachable", fmt.Errorf("admin client: %w", refused))
	assert.Equal(t, "EndpointNotAllowed", Of(err))
	assert.Equal(t, "admin client: dial 10.0.0.1: refused by policy", err.Error())
	assert.Equal(t, "", Of(errors.New("plain")))

	cause := errors.New("connection reset by 10.0.0.9")
	public := &Error{Reason: "PullFailed", Message: "the registry closed the connection early", Err: cause}
	assert.Equal(t, "the registry closed the connection early", public.Error(), "the words a tenant may read")
	assert.ErrorIs(t, fmt.Errorf("pull: %w", public), cause)
	assert.ErrorIs(t, fmt.Errorf("pull: %w", public), Sentinel("PullFailed"))
	assert.NotErrorIs(t, public, Sentinel("PullTimeout"))
	assert.Equal(t, "PullTimeout", Sentinel("PullTimeout").Error())
}
