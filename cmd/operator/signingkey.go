package main

import (
	"context"
	"fmt"

	"aead.dev/minisign"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Keys of the platform signing-key Secret.
const (
	signingKeyKey      = "minisign.key"
	signingPasswordKey = "password"
)

// loadSigningKey reads the platform's minisign secret key from the Secret
// (minisign.key, encrypted with the optional password, or unencrypted).
func loadSigningKey(ctx context.Context, client kubernetes.Interface, namespace, name string) (*minisign.PrivateKey, error) {
	secret, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("OPERATOR_SIGNING_KEY_SECRET: read Secret %s/%s: %w", namespace, name, err)
	}
	data := secret.Data[signingKeyKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("OPERATOR_SIGNING_KEY_SECRET: Secret %s/%s has no %s (a minisign secret key, as `minisign -G` writes it)", namespace, name, signingKeyKey)
	}
	var key minisign.PrivateKey
	if minisign.IsEncrypted(data) {
		if key, err = minisign.DecryptKey(string(secret.Data[signingPasswordKey]), data); err != nil {
			return nil, fmt.Errorf("OPERATOR_SIGNING_KEY_SECRET: Secret %s/%s: %s does not decrypt with its %s: %w", namespace, name, signingKeyKey, signingPasswordKey, err)
		}
	} else if err := key.UnmarshalText(data); err != nil {
		return nil, fmt.Errorf("OPERATOR_SIGNING_KEY_SECRET: Secret %s/%s: %s is not a minisign secret key: %w", namespace, name, signingKeyKey, err)
	}
	return &key, nil
}
