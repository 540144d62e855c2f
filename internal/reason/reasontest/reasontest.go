// Package reasontest checks, in a package's tests, that every reason the
// package declares is in its Reasons list: a reason added without its
// severity and remedy fails there, not in front of a user.
package reasontest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/object-store-operator/operator/internal/reason"
)

// AllListed fails t for every string constant of the package in dir whose
// name starts with one of prefixes and whose value list does not name.
func AllListed(t *testing.T, dir string, list []reason.Reason, prefixes ...string) {
	t.Helper()
	listed := map[string]bool{}
	for _, r := range list {
		listed[r.Name] = true
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", dir, err)
	}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i >= len(vs.Values) || !hasPrefix(name.Name, prefixes) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							continue
						}
						if !listed[v] {
							t.Errorf("%s = %q is not in the package's Reasons: give it a severity and a remedy there", name.Name, v)
						}
					}
				}
			}
		}
	}
}

func hasPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Spelled is list spelled as an environment variable prefix+FLAG_NAME
// spells settings: with prefix "APP_", a flag pull-timeout reads
// APP_PULL_TIMEOUT. The caller's test names the prefix, so no package
// outside the operator's main names its environment variables.
func Spelled(t testing.TB, list []reason.Reason, prefix string) reason.Set {
	t.Helper()
	set, err := reason.Spell(list, func(flag string) (string, bool) {
		return prefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_")), true
	})
	if err != nil {
		t.Fatal(err)
	}
	return set
}
