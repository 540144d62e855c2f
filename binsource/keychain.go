package binsource

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	k8schain "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
)

// keychain resolves registry credentials from image pull Secrets, the
// same Secrets a PodSpec's imagePullSecrets names, with kubelet's rules
// (go-containerregistry's Kubernetes keychain): wildcard hosts
// (*.example.com), path-scoped entries (registry/team), the most specific
// match first.
type keychain struct {
	authn.Keychain
	id string // stable identity of the credentials, for sharing fetches
}

// newKeychain reads kubernetes.io/dockerconfigjson (and legacy
// kubernetes.io/dockercfg) Secrets. As kubelet does, it goes by the
// Secret's type; a Secret of another type is an error here rather than
// silently anonymous, so the ObjectStore's condition can name it.
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
// from the ObjectStore's pull Secrets (anything but anonymous). Only such
// a pull can be private; see Fetcher.needsCredentials. An error resolving
// the credentials counts as credentials.
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
