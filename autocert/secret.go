package autocert

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/pemutil"
)

// servingCAOverride returns ca.crt of the serving CA Secret (the bundle
// pods must trust, set by the user), or nil when it is missing or holds
// none.
func servingCAOverride(secrets corelisters.SecretLister, namespace, name string) []byte {
	s, err := secrets.Secrets(namespace).Get(name)
	if err != nil {
		return nil
	}
	return s.Data[pemutil.KeyCA]
}

// SecretSource serves the key pair of one Secret through a Current and
// follows every change to it within the informer's latency (well under a
// second): no restart, no files in between.
type SecretSource struct {
	kind      string
	namespace string
	name      string
	caSecret  string
	cur       *Current
	log       zerolog.Logger
	lister    corelisters.SecretLister
	synced    cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
}

// NewSecretSource serves Secret namespace/name, of the given kind
// (KindCustom or KindAutocert). When caSecret is set, the ca.crt of that
// Secret overrides the bundle pods are told to trust. secrets must be an
// informer over the namespace.
func NewSecretSource(kind, namespace, name, caSecret string, secrets coreinformers.SecretInformer, cur *Current, log zerolog.Logger) (*SecretSource, error) {
	s := &SecretSource{
		kind: kind, namespace: namespace, name: name, caSecret: caSecret, cur: cur,
		log:    log.With().Str("component", "autocert").Str("secret", namespace+"/"+name).Logger(),
		lister: secrets.Lister(),
		synced: secrets.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "serving-secret"}),
	}
	_, err := secrets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueue,
		UpdateFunc: func(_, obj any) { s.enqueue(obj) },
		DeleteFunc: s.enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("watch Secret %s/%s: %w", namespace, name, err)
	}
	return s, nil
}

func (s *SecretSource) enqueue(obj any) {
	obj = controller.Unwrap(obj)
	secret, ok := obj.(*corev1.Secret)
	if !ok || secret.Namespace != s.namespace || (secret.Name != s.name && secret.Name != s.caSecret) {
		return
	}
	// Both Secrets feed one served certificate: one key.
	s.queue.Add(s.name)
}

// Run processes changes until ctx ends.
func (s *SecretSource) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), s.synced) {
		s.queue.ShutDown()
		return fmt.Errorf("serving Secret %s/%s: informer did not sync", s.namespace, s.name)
	}
	// An absent Secret raises no event: look once after the sync.
	s.queue.Add(s.name)
	controller.Run(ctx, s.queue, 1, s.sync, nil)
	return nil
}

// sync offers the Secret's current content. A missing or malformed Secret
// is a problem for the user to fix: it is logged (once per reason) and not
// retried, since the next change to the Secret triggers the next sync.
func (s *SecretSource) sync(_ context.Context, _ string) error {
	origin := fmt.Sprintf("Secret %s/%s", s.namespace, s.name)
	secret, err := s.lister.Secrets(s.namespace).Get(s.name)
	if apierrors.IsNotFound(err) && s.kind == KindAutocert && s.cur.Ready() != nil {
		// Expected on a cold start until the leader has stored the first
		// certificate; not an error.
		s.log.Info().Msg("waiting for autocert to store the first certificate in the Secret")
		return nil
	}
	if apierrors.IsNotFound(err) {
		s.cur.Reject(s.kind, origin, fmt.Errorf("%w: Secret %s/%s does not exist", errDeleted, s.namespace, s.name))
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", origin, err)
	}
	if s.kind == KindAutocert {
		// Autocert serves only what autocert stored: another issuer's
		// certificate is served once the operator is told to
		// (a custom certificate), not by surprise.
		if foreign, detail := Ownership(secret); foreign != Owned {
			s.cur.Reject(s.kind, origin, fmt.Errorf("%w: %s", errForeign, detail))
			return nil
		}
	}
	_, _, cert, err := pemutil.KeyPairFromSecret(secret)
	if err != nil {
		s.cur.Reject(s.kind, origin, err)
		return nil
	}
	ca := secret.Data[pemutil.KeyCA]
	if s.caSecret != "" {
		ca = s.overrideCA(ca)
	}
	_ = s.cur.Offer(s.kind, origin, cert, ca)
	return nil
}

func (s *SecretSource) overrideCA(fallback []byte) []byte {
	if ca := servingCAOverride(s.lister, s.namespace, s.caSecret); len(ca) > 0 {
		return ca
	}
	s.log.Warn().Str("caSecret", s.namespace+"/"+s.caSecret).Str("reason", "missing or without ca.crt").
		Msg("serving CA Secret unusable; using the serving Secret's own ca.crt")
	return fallback
}
