package main

import (
	"fmt"

	"github.com/object-store-operator/operator/autocert"
	"github.com/object-store-operator/operator/binsource"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/mountsecret"
	"github.com/object-store-operator/operator/rollout"
	"github.com/object-store-operator/operator/updates"
)

// reasonSets are the packages' reasons with the settings their remedies
// name spelled as this operator's environment variables.
type reasonSets struct {
	binaries, updates, mount, certs, rollout reason.Set
}

// spell names a setting, by its flag, as the environment variable users
// set (docs/configuration.md); false for a flag the table lacks.
func (c *config) spell(flag string) (string, bool) {
	for _, s := range c.settings() {
		if s.flag == flag {
			return s.env, true
		}
	}
	return "", false
}

// reasons spells every package's reasons. An error means a remedy names a
// setting that does not exist: a test catches it before any user.
func (c *config) reasons() (reasonSets, error) {
	var sets reasonSets
	for _, p := range []struct {
		name string
		list []reason.Reason
		dst  *reason.Set
	}{
		{"binsource", binsource.Reasons(), &sets.binaries},
		{"updates", updates.Reasons(), &sets.updates},
		{"mountsecret", mountsecret.Reasons(), &sets.mount},
		{"autocert", autocert.Reasons(), &sets.certs},
		{"rollout", rollout.Reasons(), &sets.rollout},
	} {
		set, err := reason.Spell(p.list, c.spell)
		if err != nil {
			return reasonSets{}, fmt.Errorf("%s: %w", p.name, err)
		}
		*p.dst = set
	}
	return sets, nil
}
