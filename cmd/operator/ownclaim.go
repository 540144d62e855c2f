package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/object-store-operator/operator/internal/claim"
)

// ownClaim is the NamespaceClaim this process made, if any.
type ownClaim struct {
	client dynamic.Interface
	name   string
	uid    types.UID
	log    zerolog.Logger
}

// makeOwnClaim makes this install's NamespaceClaim when there is none and
// this process may (an install run by hand as a cluster admin, as make
// run and the tests do): the chart makes it otherwise, and its
// ServiceAccount may not. A claim made here goes when the process stops,
// so a stopped install run by hand blocks no other.
func makeOwnClaim(ctx context.Context, client dynamic.Interface, cfg config, log zerolog.Logger) *ownClaim {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	namespaces := make([]any, 0, len(cfg.watchNamespaces))
	for _, ns := range cfg.watchNamespaces {
		namespaces = append(namespaces, ns)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": claim.Resource.GroupVersion().String(), "kind": "NamespaceClaim",
		"metadata": map[string]any{"name": cfg.namespace, "labels": map[string]any{"app.kubernetes.io/managed-by": "object-store-operator"}},
		"spec":     map[string]any{"install": cfg.serviceName, "namespaces": namespaces},
	}}
	own := &ownClaim{client: client, name: cfg.namespace, log: log}
	made, err := client.Resource(claim.Resource).Create(ctx, u, metav1.CreateOptions{})
	switch {
	case err == nil:
		own.uid = made.GetUID()
		log.Info().Str("claim", own.name).Msg("namespace claim made by this process (run by hand); removed when it stops")
	case apierrors.IsAlreadyExists(err), apierrors.IsForbidden(err):
		// The chart's, another replica's, or not ours to make: the keeper
		// says what is missing.
	default:
		log.Warn().Err(err).Str("claim", own.name).Msg("could not make the namespace claim")
	}
	return own
}

// remove deletes the claim this process made, if that one is still there.
func (o *ownClaim) remove(ctx context.Context) {
	if o.uid == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	err := o.client.Resource(claim.Resource).Delete(ctx, o.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &o.uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		o.log.Warn().Err(err).Str("claim", o.name).Msg("could not remove the namespace claim this process made")
	}
}
