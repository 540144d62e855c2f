// Package reason is the one vocabulary the operator reports in. A Reason
// is a condition's reason (and its Event's), the severity it is reported
// at, and what the user can do about it. Each package declares the
// reasons it produces next to the code that produces them (a Reasons
// function); the operator's wiring spells the settings their remedies
// name (Spell), so a remedy can never drift from its reason, and a
// setting renamed without its remedies fails to start in tests, not in
// front of a user.
package reason

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Severity is the type of the Event a reason is reported with.
type Severity string

// The two Event types Kubernetes knows.
const (
	Normal  Severity = "Normal"
	Warning Severity = "Warning"
)

// Reason is one thing the operator reports.
type Reason struct {
	// Name is the CamelCase condition and Event reason.
	Name     string
	Severity Severity
	// Remedy says what the user can do, in the operator's own words;
	// empty when there is nothing to do. A setting is named by its flag
	// in braces ("raise {pull-timeout}"): libraries do not know how the
	// operator is configured, the wiring spells it (Spell).
	Remedy string
}

// settingRef is a setting named in a remedy.
var settingRef = regexp.MustCompile(`\{([a-z0-9-]+)\}`)

// Set is a package's reasons by name, their remedies spelled.
type Set map[string]Reason

// Spell makes the Set of reasons, each setting in a remedy spelled by
// spell (a flag -> the environment variable behind it, say). A setting spell does
// not know, or a name declared twice, is an error: the reasons and the
// settings have drifted apart.
func Spell(reasons []Reason, spell func(flag string) (string, bool)) (Set, error) {
	set := make(Set, len(reasons))
	var errs []string
	for _, r := range reasons {
		if _, dup := set[r.Name]; dup {
			errs = append(errs, fmt.Sprintf("%s declared twice", r.Name))
			continue
		}
		if r.Severity != Normal && r.Severity != Warning {
			errs = append(errs, fmt.Sprintf("%s: severity %q", r.Name, r.Severity))
		}
		r.Remedy = settingRef.ReplaceAllStringFunc(r.Remedy, func(ref string) string {
			flag := ref[1 : len(ref)-1]
			name, ok := spell(flag)
			if !ok {
				errs = append(errs, fmt.Sprintf("%s: remedy names unknown setting %s", r.Name, ref))
				return ref
			}
			return name
		})
		set[r.Name] = r
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return nil, fmt.Errorf("reasons: %s", strings.Join(errs, "; "))
	}
	return set, nil
}

// Remedy is what the user can do about the reason name; "" when there is
// nothing to say (or the Set is nil).
func (s Set) Remedy(name string) string { return s[name].Remedy }

// Severity is the Event type of the reason name: Warning for a reason the
// Set does not know, so nothing unknown is reported as fine.
func (s Set) Severity(name string) Severity {
	if r, ok := s[name]; ok {
		return r.Severity
	}
	return Warning
}
