package status

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sentences joins parts of a message as sentences: each part loses the
// spaces and the end punctuation (. ; : , !) it ends with, the parts are
// joined by ". ", and each part after the first starts with a capital.
// Parts come from several hands (MinIO's own error, ending in "." or not;
// a remedy): joined naively they read "resource.. MinIO's own error".
// Empty parts are skipped; the result carries no final period.
func Sentences(parts ...string) string {
	return join(". ", true, parts)
}

// Clauses joins parts with "; " the same way, keeping each part's case.
func Clauses(parts ...string) string {
	return join("; ", false, parts)
}

func join(sep string, capital bool, parts []string) string {
	var b strings.Builder
	for _, p := range parts {
		p = trimEnd(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(sep)
			if capital {
				p = upperFirst(p)
			}
		}
		b.WriteString(p)
	}
	return b.String()
}

// trimEnd drops end punctuation and spaces, but not an ellipsis' worth of
// meaning: "v1.2" keeps its dot, only trailing ones go.
func trimEnd(s string) string {
	return strings.TrimRightFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(".;:,!", r)
	})
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError || !unicode.IsLower(r) {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
