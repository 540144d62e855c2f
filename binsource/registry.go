package binsource

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	k8schain "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
)

// withBound is ctx with a deadline d from now; d <= 0 is no bound.
func withBound(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// keychain resolves registry credentials from image pull Secrets with
// kubelet's rules (go-containerregistry's Kubernetes keychain).
type keychain struct {
	authn.Keychain
	id string // stable identity of the credentials, for sharing fetches
}

// newKeychain reads dockerconfigjson (and legacy dockercfg) Secrets by
// their type, as kubelet does; another type is an error rather than
// silently anonymous, so the condition can name it.
func newKeychain(secrets []*corev1.Secret) (*keychain, error) {
	var names []string
	pull := make([]corev1.Secret, 0, len(secrets))
	for _, s := range secrets {
		names = append(names, s.Namespace+"/"+s.Name+"@"+s.ResourceVersion)
		switch {
		case s.Type == corev1.SecretTypeDockerConfigJson && len(s.Data[corev1.DockerConfigJsonKey]) > 0:
		case s.Type == corev1.SecretTypeDockercfg && len(s.Data[corev1.DockerConfigKey]) > 0:
		default:
			return nil, fmt.Errorf("pull Secret %s/%s is neither of type %s with %s nor of type %s with %s",
				s.Namespace, s.Name, corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, corev1.SecretTypeDockercfg, corev1.DockerConfigKey)
		}
		pull = append(pull, *s)
	}
	kc, err := k8schain.NewFromPullSecrets(context.Background(), pull)
	if err != nil {
		return nil, fmt.Errorf("pull Secrets %s: %w", strings.Join(names, ", "), err)
	}
	sort.Strings(names)
	return &keychain{Keychain: kc, id: strings.Join(names, ",")}, nil
}

// usesCredentials reports whether a pull of repo is made with credentials
// (an error resolving them counts as credentials).
func usesCredentials(kc authn.Keychain, repo name.Repository) bool {
	auth, err := kc.Resolve(repo)
	if err != nil {
		return true
	}
	if auth == authn.Anonymous {
		return false
	}
	cfg, err := auth.Authorization()
	if err != nil {
		return true
	}
	return cfg != nil && *cfg != (authn.AuthConfig{})
}
