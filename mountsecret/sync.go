package mountsecret

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/reason"
)

// Reconcile brings the generated Secret, the StatefulSets' restart
// annotation and the CertificatesReady condition of one ObjectStore in
// line with the referenced Secrets. A Secret the user must fix is reported
// (condition, Event, log) and not retried: fixing it raises the event that
// syncs again. A deleted ObjectStore needs nothing: the garbage collector
// removes the generated Secret with its owner.
func (c *Controller) Reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) (controller.Result, error) {
	return controller.Result{}, c.reconcile(ctx, store, u)
}

func (c *Controller) reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) error {
	key := store.Namespace + "/" + store.Name
	// Before anything of the tenant's can end the sync early (a Secret
	// it deleted): a slot is held for the timeout at most, whatever the
	// tenant does meanwhile.
	yielded := c.expireRestart(u)
	var operatorCA []byte
	if c.cfg.OperatorCA != nil {
		operatorCA = c.cfg.OperatorCA.CABundle()
	}
	a, err := assemble(ctx, store, c.secrets, operatorCA)
	var p *problem
	if errors.As(err, &p) {
		return c.reportProblem(ctx, key, store, u, p, err)
	}
	if err != nil {
		return err
	}

	generated, handEdited, created, err := c.generated(ctx, store, a)
	if err != nil {
		if errors.As(err, &p) {
			return c.setCondition(ctx, u, metav1.ConditionFalse, reason.Of(err), p.Error())
		}
		return c.refused(ctx, u, err)
	}
	sets, err := c.sets.StatefulSets(store.Namespace).List(v1.StatefulSetSelector(store.Name))
	if err != nil {
		return fmt.Errorf("list StatefulSets of %s: %w", key, err)
	}
	// The UID tells a recreated Secret from the old one: pods restart to
	// mount the new object even when its content is the same.
	uid := string(generated.UID)
	restart := a.hash[:16] + "-" + uid[:min(8, len(uid))]
	c.endRestart(u, sets, restart)
	behind := setsBehind(sets, restart)
	changed := created
	if changed == "" {
		changed = changedContent(generated, a)
	}
	if len(behind) == 0 {
		c.restarts.forget(key) // nothing to restart: it waits for no slot
	}
	if len(behind) > 0 {
		// A restart: it starts only when the tenant allows it (pause,
		// window) and a slot is free; until then the Secret and the pods
		// stay as they are.
		if changed == "" {
			changed = "StatefulSets " + setNames(behind) + " do not mount the current certificates"
		}
		if h := c.holdRestart(key, store, changed, yielded); h != nil {
			return c.reportHold(ctx, key, store, u, h, changed)
		}
	}
	reason := created
	if written, why, err := c.rewrite(ctx, store, generated, handEdited, a); err != nil {
		return c.refused(ctx, u, err)
	} else if written != nil {
		generated, reason = written, why
	}
	if len(behind) > 0 {
		if err := c.restartSets(ctx, key, u, behind, restart, changed); err != nil {
			return err
		}
	}
	if reason != "" {
		c.rebuild.Inc()
		c.log.Info().Str("objectstore", key).Str("secret", store.Namespace+"/"+generated.Name).Str("reason", reason).
			Str("hash", a.hash).Msg("mount secret rebuilt")
	}
	return c.setCondition(ctx, u, metav1.ConditionTrue, ReasonCertificatesAssembled,
		// No hash in the message: a content change is not a status change.
		fmt.Sprintf("Secret %s holds %d keys from %d referenced Secrets", generated.Name, len(a.data), len(store.ReferencedSecrets())))
}

// setsBehind are the StatefulSets whose pod template does not carry
// restart: their pods do not mount the current generated Secret.
func setsBehind(sets []*appsv1.StatefulSet, restart string) []*appsv1.StatefulSet {
	var behind []*appsv1.StatefulSet
	for _, s := range sets {
		if s.Spec.Template.Annotations[RestartAnnotation] != restart {
			behind = append(behind, s)
		}
	}
	return behind
}

// reportProblem reports a Secret the user must fix (a referenced one, or
// the generated one that would be refused) in the log and the condition,
// and writes nothing else: fixing it raises the event that syncs again.
func (c *Controller) reportProblem(ctx context.Context, key string, store *v1.ObjectStore, u *unstructured.Unstructured, p *problem, err error) error {
	msg := "referenced Secret unusable: generated Secret left as it was"
	if p.secret == v1.GeneratedSecretName(store.Name) {
		msg = "generated Secret would be refused: nothing written"
	}
	c.log.Error().Str("objectstore", key).Str("secret", store.Namespace+"/"+p.secret).Str("field", p.field).Str("reason", reason.Of(err)).Str("detail", p.detail).
		Msg(msg)
	return c.setCondition(ctx, u, metav1.ConditionFalse, reason.Of(err), p.Error())
}

// reportHold says in the condition why a restart waits, and looks again
// when the hold says to.
func (c *Controller) reportHold(ctx context.Context, key string, store *v1.ObjectStore, u *unstructured.Unstructured, h *hold, changed string) error {
	if h.after > 0 {
		c.queue.AddAfter(key, h.after)
	}
	// A waiting tenant is woken by every slot that frees; the
	// holders it named have changed, the wait has not. Saying so
	// again each time would write a status and an Event per freed
	// slot and per waiting tenant, and the Events would crowd its
	// Restarting Event out of the recorder's per-object budget.
	if have := meta.FindStatusCondition(store.Status.Conditions, v1.ConditionCertificatesReady); h.reason == ReasonRestartQueued &&
		have != nil && have.Status == metav1.ConditionFalse && have.Reason == ReasonRestartQueued &&
		have.ObservedGeneration == u.GetGeneration() && strings.HasPrefix(have.Message, changed+";") {
		return nil
	}
	return c.setCondition(ctx, u, metav1.ConditionFalse, h.reason, h.message)
}

// restartSets rolls the StatefulSets behind the generated Secret, with a
// Restarting Event naming those it patched.
func (c *Controller) restartSets(ctx context.Context, key string, u *unstructured.Unstructured, behind []*appsv1.StatefulSet, restart, changed string) error {
	rolled, err := c.roll(ctx, behind, restart)
	if len(rolled) > 0 {
		c.cfg.Recorder.Eventf(u, corev1.EventTypeNormal, ReasonRestarting, "restarting the pods of StatefulSets %s: %s",
			strings.Join(rolled, ", "), changed)
	}
	if err != nil {
		return c.refused(ctx, u, err)
	}
	if len(rolled) > 0 {
		c.log.Info().Str("objectstore", key).Str("reason", ReasonRestarting).Str("changed", changed).Strs("restarted", rolled).
			Msg("restarting pods for new certificates")
	}
	return nil
}

// generated reads the generated Secret, creating it when it is missing:
// pods cannot start without it, so creation waits for nothing. created
// says so ("" when it existed); handEdited says its data no longer
// matches the hash it records.
func (c *Controller) generated(ctx context.Context, store *v1.ObjectStore, a *assembly) (_ *corev1.Secret, handEdited bool, created string, _ error) {
	name := v1.GeneratedSecretName(store.Name)
	existing, digest, err := c.secrets.Digest(ctx, store.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: store.Namespace,
				Labels: map[string]string{v1.ObjectStoreLabel: v1.ObjectStoreLabelValue(store.Name)},
				Annotations: map[string]string{HashAnnotation: a.hash, SourcesAnnotation: a.sourcesJSON(),
					v1.ObjectStoreNameAnnotation: store.Name},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(store,
					v1.GroupVersion.WithKind(v1.Kind))},
			},
			Type: corev1.SecretTypeOpaque,
			Data: a.data,
		}
		created, err := c.cfg.Kube.CoreV1().Secrets(store.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return nil, false, "", fmt.Errorf("create Secret %s/%s: %w", store.Namespace, name, err)
		}
		c.secrets.Remember(created, false)
		c.writes.WithLabelValues("secret_create").Inc()
		return created, false, "generated Secret missing (first creation, or deleted): created", nil
	case err != nil:
		return nil, false, "", fmt.Errorf("get Secret %s/%s: %w", store.Namespace, name, err)
	}
	if ref := metav1.GetControllerOf(existing); ref == nil || ref.UID != store.UID {
		return nil, false, "", newProblem(ReasonGeneratedSecretConflict, name, "", "exists but is not owned by this ObjectStore; rename or delete it")
	}
	return existing, digest != existing.Annotations[HashAnnotation], "", nil
}

// changedContent says what of the referenced content differs from what
// the generated Secret holds ("" when nothing does).
func changedContent(generated *corev1.Secret, a *assembly) string {
	if generated.Annotations[HashAnnotation] == a.hash {
		return ""
	}
	return "referenced content changed: " + strings.Join(changedSources(generated.Annotations[SourcesAnnotation], a.sources), ", ")
}

// rewrite brings the generated Secret's data to a when they differ, and
// says why it wrote (nil: nothing written).
func (c *Controller) rewrite(ctx context.Context, store *v1.ObjectStore, generated *corev1.Secret, handEdited bool, a *assembly) (*corev1.Secret, string, error) {
	reason := changedContent(generated, a)
	if reason == "" {
		if !handEdited {
			return nil, "", nil
		}
		reason = "edited by hand: reverted"
	}
	s := generated.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[HashAnnotation] = a.hash
	s.Annotations[SourcesAnnotation] = a.sourcesJSON()
	s.Data = a.data
	updated, err := c.cfg.Kube.CoreV1().Secrets(store.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("update Secret %s/%s: %w", store.Namespace, s.Name, err)
	}
	c.secrets.Remember(updated, false)
	c.writes.WithLabelValues("secret_update").Inc()
	return updated, reason, nil
}

func setNames(sets []*appsv1.StatefulSet) string {
	names := make([]string, len(sets))
	for i, s := range sets {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// roll sets the restart annotation on the pod template of sets and holds
// them for the operator's rollout (v1.HoldRollout), which replaces their
// pods one at a time, and names the StatefulSets it patched.
//
// Each patch is conditional on the resourceVersion the sync saw: sets
// come from the cache, which may not have seen the patch of this
// controller's previous sync yet (the sync that follows a restart, woken
// by the Secret or the status it wrote, can run before the StatefulSets'
// watch delivers it). Patched again, such a StatefulSet would not roll
// (its template is the same), but the sync would say it restarts again,
// in a second Restarting Event. A conflict means the cache is behind that
// StatefulSet: it is left for the sync its newer version's event starts,
// which decides on what it then holds.
func (c *Controller) roll(ctx context.Context, sets []*appsv1.StatefulSet, value string) ([]string, error) {
	var rolled []string
	for _, s := range sets {
		// The operator's rollout replaces the pods, one at a time and
		// only when MinIO agrees (package rollout), not the statefulset
		// controller.
		annotations, spec := v1.HoldRollout(s, false)
		if spec == nil {
			spec = map[string]any{}
		}
		spec["template"] = map[string]any{"metadata": map[string]any{"annotations": map[string]string{RestartAnnotation: value}}}
		metadata := map[string]any{"annotations": annotations}
		if s.ResourceVersion != "" {
			metadata["resourceVersion"] = s.ResourceVersion
		}
		patch, err := json.Marshal(map[string]any{"metadata": metadata, "spec": spec})
		if err != nil {
			return rolled, fmt.Errorf("roll StatefulSet %s/%s: %w", s.Namespace, s.Name, err)
		}
		_, err = c.cfg.Kube.AppsV1().StatefulSets(s.Namespace).Patch(ctx, s.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsConflict(err) {
			c.log.Debug().Str("statefulset", s.Namespace+"/"+s.Name).Str("resourceVersion", s.ResourceVersion).
				Msg("not rolled: the cache is behind the StatefulSet; its next event syncs the tenant again")
			continue
		}
		if err != nil {
			return rolled, fmt.Errorf("roll StatefulSet %s/%s: %w", s.Namespace, s.Name, err)
		}
		c.writes.WithLabelValues("statefulset_patch").Inc()
		rolled = append(rolled, s.Name)
	}
	return rolled, nil
}

// refused reports a write the apiserver refused (invalid, forbidden, too
// large) in the condition, so CertificatesReady never stays True over a
// stale Secret, and returns err for a retry with backoff. Other errors
// (a timeout, a conflict) are only retried.
func (c *Controller) refused(ctx context.Context, u *unstructured.Unstructured, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsBadRequest(err) {
		c.log.Error().Str("objectstore", u.GetNamespace()+"/"+u.GetName()).Str("reason", ReasonWriteRefused).Err(err).
			Msg("the apiserver refused a write; the generated Secret or the pods are stale")
		if cerr := c.setCondition(ctx, u, metav1.ConditionFalse, ReasonWriteRefused, err.Error()); cerr != nil {
			return cerr
		}
	}
	return err
}

// setCondition writes CertificatesReady when it changes, with an Event,
// the reason's remedy ending the message.
func (c *Controller) setCondition(ctx context.Context, u *unstructured.Unstructured, status metav1.ConditionStatus, reason, message string) error {
	if remedy := c.cfg.Reasons.Remedy(reason); remedy != "" {
		message = strings.TrimRight(message, ". ") + ". " + strings.ToUpper(remedy[:1]) + remedy[1:]
	}
	wrote, err := c.status.SetCondition(ctx, u, metav1.Condition{
		Type: v1.ConditionCertificatesReady, Status: status, Reason: reason, Message: message,
	})
	if wrote {
		c.writes.WithLabelValues("status_update").Inc()
	}
	return err
}
