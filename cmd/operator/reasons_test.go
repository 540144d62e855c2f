package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/autocert"
	"github.com/object-store-operator/operator/binsource"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/mountsecret"
	"github.com/object-store-operator/operator/updates"
)

// Every remedy names only settings that exist, spelled as users set them.
func TestEveryRemedySpellsRealSettings(t *testing.T) {
	cfg, _, err := loadConfig(nil, io.Discard)
	require.NoError(t, err, "a remedy naming an unknown setting fails the configuration")
	assert.Contains(t, cfg.why.binaries.Remedy("PullTimeout"), "OPERATOR_PULL_TIMEOUT")
	assert.Contains(t, cfg.why.binaries.Remedy("Unsigned"), "OPERATOR_SIGNING_KEY_SECRET")
	assert.Contains(t, cfg.why.certs.Remedy(autocert.ReasonCSRFailed), "OPERATOR_CSR_SIGNER_NAME")
	for _, set := range []reason.Set{cfg.why.binaries, cfg.why.updates, cfg.why.mount, cfg.why.certs} {
		for name, r := range set {
			assert.NotRegexp(t, `\{[a-z0-9-]+\}`, r.Remedy, "%s: every setting spelled", name)
		}
	}

	_, err = reason.Spell([]reason.Reason{{Name: "X", Severity: reason.Warning, Remedy: "raise {no-such-setting}"}}, cfg.spell)
	assert.ErrorContains(t, err, "X: remedy names unknown setting {no-such-setting}")
}

// Every reason the operator reports is explained in the docs: a
// condition's reason is what users look up.
func TestEveryReasonIsDocumented(t *testing.T) {
	var docs strings.Builder
	files, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		docs.Write(b)
	}
	// autocert's problems are not reported by name: each picks the remedy
	// of a log line, and those lines are in docs/tls.md.
	for pkg, list := range map[string][]reason.Reason{
		"binsource": binsource.Reasons(), "updates": updates.Reasons(), "mountsecret": mountsecret.Reasons(),
	} {
		for _, r := range list {
			assert.True(t, strings.Contains(docs.String(), "`"+r.Name+"`"), "%s reports %s: docs/ must explain it", pkg, r.Name)
		}
	}
}
