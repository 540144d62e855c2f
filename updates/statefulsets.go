package updates

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// containerName is the container of a tenant's pods that runs MinIO.
const containerName = "minio"

// setImage gives the minio container of every StatefulSet of the store
// spec.image, where it differs, and returns the ones it changed (after an
// in-place update: see patchImages for what the pods then do); replaced
// replaced names those whose pods are replaced once more to run it
// (RollingUpdate).
func (c *Controller) setImage(ctx context.Context, store *v1.ObjectStore) (changed, replaced []string, err error) {
	sets, err := c.statefulSets(store)
	if err != nil {
		return nil, nil, err
	}
	changed, _, err = c.patchImages(ctx, store, false)
	for _, s := range sets {
		if slices.Contains(changed, s.Name) && s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
			replaced = append(replaced, s.Name)
		}
	}
	return changed, replaced, err
}

// rollImage is setImage for a rolling update: a store without StatefulSets
// cannot be rolled.
func (c *Controller) rollImage(ctx context.Context, store *v1.ObjectStore) ([]string, error) {
	changed, total, err := c.patchImages(ctx, store, true)
	if err == nil && total == 0 {
		err = fmt.Errorf("no StatefulSet in namespace %s is labelled %s=%s", store.Namespace, v1.ObjectStoreLabel, v1.ObjectStoreLabelValue(store.Name))
	}
	return changed, err
}

// patchImages sets spec.image where it differs and says which StatefulSets
// it changed out of how many the store has. The pods are replaced by the
// operator's rollout, one at a time and only when MinIO agrees
// (v1.HoldRollout): for a roll, and for a StatefulSet under RollingUpdate,
// whose controller would otherwise replace them at once. After an
// in-place update (roll false) a StatefulSet under OnDelete replaces
// nothing: its pods run the release already.
func (c *Controller) patchImages(ctx context.Context, store *v1.ObjectStore, roll bool) (changed []string, total int, err error) {
	sets, err := c.statefulSets(store)
	if err != nil {
		return nil, 0, err
	}
	for _, s := range sets {
		current, ok := minioImage(s)
		if !ok {
			return changed, len(sets), fmt.Errorf("StatefulSet %s/%s has no container named %q", s.Namespace, s.Name, containerName)
		}
		if current == store.Spec.Image {
			continue
		}
		// A strategic merge patch merges containers by name: only the
		// image of the minio container changes.
		spec := map[string]any{}
		metadata := map[string]any{}
		if roll || s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
			var annotations map[string]string
			annotations, spec = v1.HoldRollout(s, roll)
			if spec == nil {
				spec = map[string]any{}
			}
			metadata["annotations"] = annotations
		}
		spec["template"] = map[string]any{"spec": map[string]any{
			"containers": []map[string]any{{"name": containerName, "image": store.Spec.Image}},
		}}
		patch, err := json.Marshal(map[string]any{"metadata": metadata, "spec": spec})
		if err != nil {
			return changed, len(sets), err
		}
		if _, err := c.cfg.Kube.AppsV1().StatefulSets(s.Namespace).Patch(ctx, s.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return changed, len(sets), fmt.Errorf("set the image of StatefulSet %s/%s: %w", s.Namespace, s.Name, err)
		}
		changed = append(changed, s.Name)
	}
	return changed, len(sets), nil
}

// statefulSets lists the store's StatefulSets (by its label) from the
// informer, sorted by name. They are the lister's: never modified.
func (c *Controller) statefulSets(store *v1.ObjectStore) ([]*appsv1.StatefulSet, error) {
	sets, err := c.cfg.StatefulSets.StatefulSets(store.Namespace).List(v1.StatefulSetSelector(store.Name))
	if err != nil {
		return nil, fmt.Errorf("list StatefulSets of ObjectStore %s/%s: %w", store.Namespace, store.Name, err)
	}
	slices.SortFunc(sets, func(a, b *appsv1.StatefulSet) int { return strings.Compare(a.Name, b.Name) })
	return sets, nil
}

func minioImage(s *appsv1.StatefulSet) (string, bool) {
	for _, c := range s.Spec.Template.Spec.Containers {
		if c.Name == containerName {
			return c.Image, true
		}
	}
	return "", false
}

// setsOf says how many StatefulSets the store has, whether all of them
// run spec.image in their minio container, and whose pods the rollout is
// replacing now.
func (c *Controller) setsOf(store *v1.ObjectStore) setsState {
	sets, err := c.statefulSets(store)
	if err != nil {
		return setsState{}
	}
	st := setsState{count: len(sets), onImage: len(sets) > 0}
	for _, s := range sets {
		if image, _ := minioImage(s); image != store.Spec.Image {
			st.onImage = false
		}
		if held, _, _ := v1.RolloutOf(s); held {
			st.replacing = append(st.replacing, s.Name)
		}
	}
	if v1.RolloutIdle(meta.FindStatusCondition(store.Status.Conditions, v1.ConditionPodsCurrent)) {
		st.replacing = nil
	}
	return st
}
