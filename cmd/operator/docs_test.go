package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// securityProof is one "proved by" reference of docs/security.md: a test
// (or fuzz target) and the package the doc says it is in.
type securityProof struct {
	pkg, name, row string
}

// securityProofs reads the "proved by" column of docs/security.md's tables.
// A cell lists groups separated by ";", each a package (`cmd/operator`, or
// e2e for test/e2e) followed by the tests in it, in backquotes:
//
//	e2e `TestA`, `TestB`; `updates` `TestC` (hotfix rows), `FuzzD`
func securityProofs(doc string) ([]securityProof, error) {
	quoted := regexp.MustCompile("`([^`]+)`")
	var out []securityProof
	for line := range strings.SplitSeq(doc, "\n") {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 4 || !strings.Contains(cells[len(cells)-2], "Test") {
			continue // not a table row, or no test in its last cell
		}
		cell := strings.TrimSpace(cells[len(cells)-2])
		for group := range strings.SplitSeq(cell, ";") {
			group = strings.TrimSpace(group)
			var pkg string
			var names []string
			if rest, ok := strings.CutPrefix(group, "e2e "); ok {
				pkg = "test/e2e"
				group = rest
			}
			for _, m := range quoted.FindAllStringSubmatch(group, -1) {
				switch {
				case strings.HasPrefix(m[1], "Test") || strings.HasPrefix(m[1], "Fuzz") || strings.HasPrefix(m[1], "Benchmark"):
					names = append(names, m[1])
				case pkg == "" && len(names) == 0:
					pkg = m[1]
				}
			}
			if pkg == "" && len(names) > 0 {
				return nil, fmt.Errorf("%q names %v in no package", cell, names)
			}
			for _, n := range names {
				out = append(out, securityProof{pkg: pkg, name: n, row: cell})
			}
		}
	}
	return out, nil
}

// Every test docs/security.md gives as the proof of a line exists in the
// package it names: a renamed or moved test, or a wrong package, fails
// here instead of leaving a claim that nothing proves.
func TestSecurityDocNamesOnlyTestsThatExist(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	require.NoError(t, err)
	proofs, err := securityProofs(string(doc))
	require.NoError(t, err)
	require.Greater(t, len(proofs), 50, "the doc's tables were read")

	sources := map[string]string{} // package directory -> its test files
	for _, p := range proofs {
		src, ok := sources[p.pkg]
		if !ok {
			files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(p.pkg), "*_test.go"))
			require.NoError(t, err)
			var b strings.Builder
			for _, f := range files {
				content, err := os.ReadFile(f)
				require.NoError(t, err)
				b.Write(content)
			}
			src = b.String()
			sources[p.pkg] = src
		}
		if !assert.NotEmpty(t, src, "docs/security.md names package %q (for %s), which has no tests", p.pkg, p.name) {
			continue
		}
		assert.Regexp(t, regexp.MustCompile(`(?m)^func `+regexp.QuoteMeta(p.name)+`\(`), src,
			"docs/security.md names %s in %s, which has no such test (row: %s)", p.name, p.pkg, p.row)
	}
}

// The reader of the doc's references understands its notation, so that the
// test above checks what a reader would look for.
func TestSecurityProofsAreReadAsTheDocWritesThem(t *testing.T) {
	got, err := securityProofs("| a | b | e2e `TestA`, `TestB`; `updates` `TestC` (hotfix rows), `FuzzD`; `cmd/operator` `TestE` |\n" +
		"| header | no test here |\n")
	require.NoError(t, err)
	var refs []string
	for _, p := range got {
		refs = append(refs, p.pkg+" "+p.name)
	}
	assert.Equal(t, []string{"test/e2e TestA", "test/e2e TestB", "updates TestC", "updates FuzzD", "cmd/operator TestE"}, refs)
	_, err = securityProofs("| a | b | `TestA` |\n")
	assert.Error(t, err, "a test without a package")
}
