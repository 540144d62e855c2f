package reason

import (
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
