package main

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// urlKeySecret is the Secret in the operator namespace holding the key a
// private binary's URL component is derived from (binsource), under
// urlKeyKey. Every replica must derive the same URLs, so they share it.
const (
	urlKeySecret = "object-store-operator-url-key"
	urlKeyKey    = "key"
	// urlKeyBytes is the size of a created key: HMAC-SHA256's block is
	// larger, its output 32 bytes; a shorter key would be the weak part.
	urlKeyBytes = 32
)

// loadURLKey reads the URL key, creating the Secret with a random key if
// it does not exist. Any replica may create it: Create is atomic, so of
// replicas starting together one wins and the others get AlreadyExists and
// read the winner's key. (Waiting for the leader instead would keep a
// replica from serving private URLs until an election, for the same
// result.) Deleting the Secret changes every private URL at the next
// start: tenants are given their new URLs; old ones answer 404.
func loadURLKey(ctx context.Context, client kubernetes.Interface, namespace string) ([]byte, error) {
	secrets := client.CoreV1().Secrets(namespace)
	for range 3 {
		s, err := secrets.Get(ctx, urlKeySecret, metav1.GetOptions{})
		if err == nil {
			key := s.Data[urlKeyKey]
			if len(key) < urlKeyBytes {
				return nil, fmt.Errorf("Secret %s/%s: %s has %d bytes, fewer than %d (delete the Secret to have a new key made)", namespace, urlKeySecret, urlKeyKey, len(key), urlKeyBytes)
			}
			return key, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read the URL key Secret %s/%s: %w", namespace, urlKeySecret, err)
		}
		key := make([]byte, urlKeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("make a URL key: %w", err)
		}
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: urlKeySecret, Namespace: namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "object-store-operator"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{urlKeyKey: key},
		}, metav1.CreateOptions{})
		if err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create the URL key Secret %s/%s: %w", namespace, urlKeySecret, err)
		}
	}
	return nil, fmt.Errorf("the URL key Secret %s/%s was created and removed again while it was read", namespace, urlKeySecret)
}
