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
	"errors"
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

// Error is a failure with the reason it is reported under: the one error
// type that carries a reason, whichever package meets the failure. Its
// remedy is the reason's (Set.Remedy), added in the user's words at the
// edge: a condition's message, an Event, the log.
type Error struct {
	// Reason is the name of a Reason: a condition's or an Event's reason.
	Reason string
	// Message, when set, is what may be shown whole to whoever reads the
	// object the failure is reported on; empty: Err's text.
	Message string
	// Err is the cause, for the operator's log and for errors.Is and
	// errors.As; nil for a failure the operator words itself.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Message != "":
		return e.Message
	case e.Err != nil:
		return e.Err.Error()
	}
	return e.Reason
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes a bare Error (a reason and nothing else, as a package declares
// its sentinels: Sentinel) match any Error of that reason, so
// errors.Is(err, ErrX) asks whether err is reported under X.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Err == nil && t.Reason == e.Reason
}

// Sentinel is a bare Error of reason name, to declare once and compare
// with errors.Is.
func Sentinel(name string) *Error { return &Error{Reason: name} }

// Wrap files err under name, unless err carries a reason already: the
// reason found nearest the failure is the more specific (an admin client
// refused for its endpoint stays EndpointNotAllowed when the caller files
// every admin client failure under TenantUnreachable).
func Wrap(name string, err error) *Error {
	if inner := Of(err); inner != "" {
		name = inner
	}
	return &Error{Reason: name, Err: err}
}

// Errorf is Wrap of fmt.Errorf(format, args...).
func Errorf(name, format string, args ...any) *Error {
	return Wrap(name, fmt.Errorf(format, args...))
}

// Of returns the reason err carries, "" for an error that carries none.
func Of(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}
