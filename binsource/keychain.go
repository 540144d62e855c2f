package binsource

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
)

// keychain resolves registry credentials from image pull Secrets, the
// same Secrets a PodSpec's imagePullSecrets names.
type keychain struct {
	auths map[string]authn.AuthConfig
	id    string // stable identity of the credentials, for sharing fetches
}

type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// newKeychain reads kubernetes.io/dockerconfigjson (and legacy dockercfg)
// Secrets. Later Secrets do not override earlier ones, as with kubelet.
func newKeychain(secrets []*corev1.Secret) (*keychain, error) {
	k := &keychain{auths: map[string]authn.AuthConfig{}}
	var names []string
	for _, s := range secrets {
		names = append(names, s.Namespace+"/"+s.Name+"@"+s.ResourceVersion)
		var auths map[string]dockerAuth
		switch {
		case len(s.Data[corev1.DockerConfigJsonKey]) > 0:
			var cfg dockerConfig
			if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
				return nil, fmt.Errorf("pull Secret %s/%s: %s is not valid JSON: %w", s.Namespace, s.Name, corev1.DockerConfigJsonKey, err)
			}
			auths = cfg.Auths
		case len(s.Data[corev1.DockerConfigKey]) > 0:
			if err := json.Unmarshal(s.Data[corev1.DockerConfigKey], &auths); err != nil {
				return nil, fmt.Errorf("pull Secret %s/%s: %s is not valid JSON: %w", s.Namespace, s.Name, corev1.DockerConfigKey, err)
			}
		default:
			return nil, fmt.Errorf("pull Secret %s/%s has neither %s nor %s", s.Namespace, s.Name, corev1.DockerConfigJsonKey, corev1.DockerConfigKey)
		}
		for server, a := range auths {
			host := registryHost(server)
			if _, seen := k.auths[host]; seen {
				continue
			}
			cfg := authn.AuthConfig{Username: a.Username, Password: a.Password}
			if a.Auth != "" && cfg.Username == "" {
				raw, err := base64.StdEncoding.DecodeString(a.Auth)
				if err != nil {
					return nil, fmt.Errorf("pull Secret %s/%s: auth for %s is not base64", s.Namespace, s.Name, server)
				}
				cfg.Username, cfg.Password, _ = strings.Cut(string(raw), ":")
			}
			k.auths[host] = cfg
		}
	}
	sort.Strings(names)
	k.id = strings.Join(names, ",")
	return k, nil
}

// registryHost normalises "https://host:5000/v1/" to "host:5000".
func registryHost(server string) string {
	server = strings.TrimPrefix(strings.TrimPrefix(server, "https://"), "http://")
	host, _, _ := strings.Cut(server, "/")
	return host
}

// Resolve implements authn.Keychain.
func (k *keychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if cfg, ok := k.auths[r.RegistryStr()]; ok {
		return authn.FromConfig(cfg), nil
	}
	return authn.Anonymous, nil
}
