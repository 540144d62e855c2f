package binsource

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/object-store-operator/operator/internal/registryguard"
)

type fakeResolver map[string][]string

func (r fakeResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	if host == "slow.example" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// TestAnAddressAndANameOfOneServerShareRegistryKeys: the key a pull counts
// against is the lowest address behind the name (so 127.0.0.1 and
// localhost meet, and so do two names of one server); a name that does
// not resolve, or not in time, counts as itself.
func TestAnAddressAndANameOfOneServerShareRegistryKeys(t *testing.T) {
	r := fakeResolver{
		"localhost":        {"::1", "127.0.0.1", "127.0.0.1"},
		"registry.example": {"10.0.0.2", "10.0.0.1", "fe80::1%eth0"},
		"other.example":    {"fe80::1%eth1", "10.0.0.1"},
	}
	key := func(host string) string {
		return registryguard.Key(t.Context(), r, 50*time.Millisecond, registryguard.CanonicalHost(host, false))
	}
	assert.Equal(t, "127.0.0.1:5000", key("127.0.0.1:5000"))
	assert.Equal(t, "127.0.0.1:5000", key("localhost:5000"))
	assert.Equal(t, "10.0.0.1:443", key("REGISTRY.example"))
	assert.Equal(t, key("registry.example"), key("other.example"))
	assert.Equal(t, key("registry.example"), key("registry.example:443"))
	assert.Equal(t, "unknown.example:443", key("unknown.example"))
	assert.Equal(t, "slow.example:443", key("slow.example"), "a lookup that does not answer in time")
}
