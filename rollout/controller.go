package rollout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/status"
)

// ErrNotNow is what Health's error is (errors.Is) when MinIO says no node
// may go down now (412 to the maintenance check, or not healthy).
var ErrNotNow = errors.New("MinIO says no node may go down now")

// Health asks an ObjectStore's MinIO whether one of its nodes may go down
// now.
type Health interface {
	// MayTakeDown asks about pod (MinIO's check answers for the node
	// that answers it). Its error is nil when MinIO answers 200 to the
	// maintenance check, ErrNotNow when it says no or cannot be asked
	// yet (worded as which), and another error when it cannot be asked;
	// asked, when not empty, says that another than pod's own node may
	// have answered, and why.
	MayTakeDown(ctx context.Context, store *v1.ObjectStore, pod string) (asked string, err error)
}

// Config configures the controller.
type Config struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// StatefulSets holds those labelled v1.ObjectStoreLabel; Pods the
	// StatefulSets' pods, with their UID, creation and deletion times,
	// revision label and Ready condition (placement.TrimPod keeps them).
	StatefulSets cache.SharedIndexInformer
	Pods         cache.SharedIndexInformer
	ObjectStores cache.SharedIndexInformer
	Health       Health
	// MaxUnavailable and PodTimeout apply where an ObjectStore sets
	// neither (spec.restarts).
	MaxUnavailable int
	PodTimeout     time.Duration
	// QuorumPoll is how soon a tenant whose MinIO refused is asked again.
	QuorumPoll time.Duration
	Recorder   record.EventRecorder
	Reasons    reason.Set
	Log        zerolog.Logger
	Registerer prometheus.Registerer
	Workers    int
	// SyncsPerTenant bounds how many of one unit's ObjectStores are synced
	// at once: a tenant whose MinIO never answers the maintenance check
	// holds that many workers at most. UnitOf names a key's unit (nil: its
	// namespace).
	SyncsPerTenant int
	UnitOf         func(key string) string
	Clock          clock.PassiveClock
}

// Controller replaces the pods of the StatefulSets the operator holds
// (v1.RolloutAnnotation), as the package comment says. It needs leadership:
// two replicas must never each take a pod down.
type Controller struct {
	cfg    Config
	log    zerolog.Logger
	loop   *controller.Loop[*v1.ObjectStore]
	sets   appslisters.StatefulSetLister
	pods   cache.Indexer
	status *status.Writer
	// replaced counts pods this controller took down.
	replaced prometheus.Counter
}

// FieldManager owns the PodsCurrent condition.
const FieldManager = "object-store-operator-rollout"

// New wires the controller's event handlers; call Run to work.
func New(cfg Config) (*Controller, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	c := &Controller{
		cfg:    cfg,
		log:    cfg.Log.With().Str("component", "rollout").Logger(),
		sets:   appslisters.NewStatefulSetLister(cfg.StatefulSets.GetIndexer()),
		pods:   cfg.Pods.GetIndexer(),
		status: &status.Writer{Client: cfg.Dynamic, Manager: FieldManager, Recorder: cfg.Recorder, Reasons: cfg.Reasons, Clock: cfg.Clock},
		replaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_rollout_pods_replaced_total",
			Help: "Pods the operator took down to run a new template (certificate restarts, rolling fallbacks), one at a time.",
		}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(c.replaced)
	}
	var err error
	c.loop, err = controller.NewLoop(controller.Options[*v1.ObjectStore]{
		Name: "rollout", ObjectStores: cfg.ObjectStores, Convert: v1.FromUnstructured, Workers: cfg.Workers,
		PerUnit: cfg.SyncsPerTenant, UnitOf: cfg.UnitOf,
		RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string](),
		Changed:     specChangedOrUpdateEnded,
		Synced:      []cache.InformerSynced{cfg.StatefulSets.HasSynced, cfg.Pods.HasSynced},
		OnError: func(key string, err error) {
			c.log.Warn().Str("objectstore", key).Err(err).Msg("sync failed; retrying with backoff")
		},
		Registerer: cfg.Registerer, Log: cfg.Log,
	}, c)
	if err != nil {
		return nil, err
	}
	// A StatefulSet's or a pod's change is all that moves a rollout on.
	queue := func(obj any) {
		obj = controller.Unwrap(obj)
		m, err := metaOf(obj)
		if err != nil {
			return
		}
		if key := c.storeKey(m); key != "" {
			c.loop.Queue().Add(key)
		}
	}
	for _, inf := range []cache.SharedIndexInformer{cfg.StatefulSets, cfg.Pods} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: queue, UpdateFunc: func(_, obj any) { queue(obj) }, DeleteFunc: queue,
		}); err != nil {
			return nil, fmt.Errorf("rollout event handler: %w", err)
		}
	}
	return c, nil
}

// specChangedOrUpdateEnded queues an ObjectStore on a spec change, a
// resync, and the end of its in-place update (status.update removed): a
// rollout waiting for the update goes on at once. Other status writes,
// this controller's own included, do not queue.
func specChangedOrUpdateEnded(old, obj *unstructured.Unstructured) bool {
	_, was, _ := unstructured.NestedFieldNoCopy(old.Object, "status", "update")
	_, is, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "update")
	return controller.SpecChangedOrResync(old, obj) || (was && !is)
}

func metaOf(obj any) (metav1.Object, error) {
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		return o, nil
	case *corev1.Pod:
		return o, nil
	}
	return nil, fmt.Errorf("unexpected %T", obj)
}

// storeKey is the ObjectStore a labelled StatefulSet, or a pod of one,
// belongs to ("" for none).
func (c *Controller) storeKey(m metav1.Object) string {
	if p, ok := m.(*corev1.Pod); ok {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "StatefulSet" {
			return ""
		}
		s, err := c.sets.StatefulSets(p.Namespace).Get(ref.Name)
		if err != nil {
			return ""
		}
		m = s
	}
	if name := v1.ObjectStoreOf(m); name != "" {
		return m.GetNamespace() + "/" + name
	}
	return ""
}

// NeedLeaderElection: only the leader takes pods down.
func (c *Controller) NeedLeaderElection() bool { return true }

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) error { return c.loop.Run(ctx) }

// Reconcile moves one ObjectStore's rollout on by at most one pod.
func (c *Controller) Reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) (controller.Result, error) {
	key := store.Namespace + "/" + store.Name
	sets, err := c.sets.StatefulSets(store.Namespace).List(v1.StatefulSetSelector(store.Name))
	if err != nil {
		return controller.Result{}, fmt.Errorf("list StatefulSets of %s: %w", key, err)
	}
	held := false
	for _, s := range sets {
		_, ours := s.Annotations[v1.RolloutAnnotation]
		held = held || ours
	}
	if !held {
		return controller.Result{}, nil
	}
	maxUnavailable, timeout := c.settings(store)
	st := plan(sets, c.podsOf(store.Namespace), maxUnavailable, timeout, c.cfg.Clock.Now())
	switch st.verb {
	case done:
		if err := c.release(ctx, sets); err != nil {
			return controller.Result{}, err
		}
		return controller.Result{}, c.condition(ctx, u, metav1.ConditionTrue, ReasonPodsCurrent, st.message)
	case wait:
		return controller.Result{RequeueAfter: st.after}, c.condition(ctx, u, metav1.ConditionFalse, ReasonReplacingPod, st.message)
	case stuck:
		c.log.Warn().Str("objectstore", key).Str("pod", store.Namespace+"/"+st.pod).Str("reason", st.reason).Msg(st.message)
		return controller.Result{}, c.condition(ctx, u, metav1.ConditionFalse, st.reason, st.message)
	}
	if up := store.Status.Update; up != nil {
		// One disruption at a time: a pod taken down during an in-place
		// update fails the update on its node, and the pod comes back on
		// the image's binary beside nodes updated away from it. The
		// update's end queues this ObjectStore (specChangedOrUpdateEnded).
		msg := fmt.Sprintf("no pod is taken down until the in-place update to %s ends (status.update) (%s)", up.Release, progress(st))
		return controller.Result{}, c.condition(ctx, u, metav1.ConditionFalse, ReasonWaitingForUpdate, msg)
	}
	if st.verb == replaceAll {
		return controller.Result{}, c.replaceAll(ctx, key, store, u, st)
	}
	return c.replace(ctx, key, store, u, st, singleServer(store, sets))
}

// singleServer: the tenant is one MinIO server, by MinIO's own count of
// its servers (its server info, status.nodes) and by its StatefulSets'
// replicas alike. Either alone may be wrong: status.nodes stays as last
// read while the updater cannot read it (a tenant grown since), and the
// StatefulSets need not list every node (peers orphaned by kubectl
// delete --cascade=orphan, a pool not labelled).
func singleServer(store *v1.ObjectStore, sets []*appsv1.StatefulSet) bool {
	var n int64
	for _, s := range sets {
		n += int64(replicas(s))
	}
	return n == 1 && len(store.Status.Nodes) == 1
}

// Finish ends the rollout of an ObjectStore that is gone: its StatefulSets
// are the tenant's and outlive it, and one left held would never roll a
// change of the tenant's own again (its partition at the replicas).
func (c *Controller) Finish(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || namespace == "" || name == "" {
		// Not a key this controller queues (an empty namespace would list
		// every namespace's StatefulSets): nothing to put back.
		return nil //nolint:nilerr // see above
	}
	sets, err := c.sets.StatefulSets(namespace).List(v1.StatefulSetSelector(name))
	if err != nil {
		return fmt.Errorf("list StatefulSets of %s: %w", key, err)
	}
	var held []string
	for _, s := range sets {
		if ours, _, _ := v1.RolloutOf(s); ours {
			held = append(held, s.Name)
		}
	}
	if len(held) == 0 {
		return nil
	}
	if err := c.release(ctx, sets); err != nil {
		return err
	}
	c.log.Info().Str("objectstore", key).Strs("statefulSets", held).Str("reason", ReasonObjectStoreGone).
		Msg("rollout ended: the ObjectStore is gone; its StatefulSets get their own partition back")
	return nil
}

// replaceAll takes every pod behind down at once, asking MinIO nothing:
// its nodes cannot run two binaries side by side. Under RollingUpdate the
// partition goes to 0 first, so that the pods come back from the new
// template.
func (c *Controller) replaceAll(ctx context.Context, key string, store *v1.ObjectStore, u *unstructured.Unstructured, st step) error {
	var names []string
	lowered := map[string]bool{}
	for _, p := range st.pods {
		if !onDelete(p.set) && partition(p.set) > 0 && !lowered[p.set.Name] {
			if err := c.lowerPartition(ctx, p.set, 0); err != nil {
				return err
			}
			lowered[p.set.Name] = true
		}
		if err := c.deletePod(ctx, p.set.Namespace, p.name, p.pod.UID); err != nil {
			return err
		}
		c.replaced.Inc()
		names = append(names, p.name)
	}
	msg := fmt.Sprintf("replacing pods %s together: their new image runs another binary, which MinIO does not run beside the old one (%s)", strings.Join(names, ", "), progress(st))
	c.log.Info().Str("objectstore", key).Strs("pods", names).Str("reason", ReasonReplacingPod).Msg(msg)
	return c.condition(ctx, u, metav1.ConditionFalse, ReasonReplacingPod, msg)
}

// replace takes st.pod down, after the maintenance check when it serves.
func (c *Controller) replace(ctx context.Context, key string, store *v1.ObjectStore, u *unstructured.Unstructured, st step, single bool) (controller.Result, error) {
	unchecked := ""
	if st.ready {
		asked, err := c.cfg.Health.MayTakeDown(ctx, store, st.pod)
		if asked != "" {
			unchecked = " (" + asked + ")"
		}
		switch {
		case errors.Is(err, ErrNotNow) && single:
			// A single MinIO server answers 412 whatever its health: the
			// check leaves out the answering node's own drives, and it has
			// no others. Heeded, it would hold the restart for ever while
			// the certificates go stale; the restart costs what any
			// restart of it costs.
			unchecked = fmt.Sprintf(", the tenant's only MinIO server (status.nodes and its StatefulSets agree), whatever its maintenance check says (%v): a single server's says 412 always", err) + unchecked
		case errors.Is(err, ErrNotNow):
			msg := fmt.Sprintf("pod %s waits: %v%s (%s)", st.pod, err, unchecked, progress(st))
			return controller.Result{RequeueAfter: c.cfg.QuorumPoll}, c.condition(ctx, u, metav1.ConditionFalse, ReasonWaitingForQuorum, msg)
		case err != nil:
			// The pods are the tenant's; a MinIO the operator cannot ask
			// is replaced on readiness alone, as the statefulset
			// controller would, rather than never (its certificates may
			// be what keeps it unreachable).
			unchecked = fmt.Sprintf(" without the maintenance check (%v)", err) + unchecked
		}
	}
	if err := c.takeDown(ctx, st); err != nil {
		return controller.Result{}, err
	}
	c.replaced.Inc()
	msg := fmt.Sprintf("replacing pod %s%s (%s)", st.pod, unchecked, progress(st))
	c.log.Info().Str("objectstore", key).Str("pod", store.Namespace+"/"+st.pod).Str("reason", ReasonReplacingPod).Msg(msg)
	return controller.Result{}, c.condition(ctx, u, metav1.ConditionFalse, ReasonReplacingPod, msg)
}

// takeDown deletes the pod (OnDelete), or lowers the partition to its
// ordinal so the statefulset controller replaces it (RollingUpdate).
func (c *Controller) takeDown(ctx context.Context, st step) error {
	if onDelete(st.set) {
		if st.uid == "" {
			return nil // plan takes down no pod the StatefulSet does not control
		}
		return c.deletePod(ctx, st.set.Namespace, st.pod, st.uid)
	}
	if partition(st.set) <= int32(st.ordinal) {
		return nil // the statefulset controller has it already
	}
	return c.lowerPartition(ctx, st.set, st.ordinal)
}

// deletePod deletes the pod plan saw, controlled by its StatefulSet (uid):
// not one that replaced it meanwhile, nor another of the same name.
func (c *Controller) deletePod(ctx context.Context, namespace, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if err := c.cfg.Kube.CoreV1().Pods(namespace).Delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// lowerPartition sets s's partition to ordinal, if s is still as read.
func (c *Controller) lowerPartition(ctx context.Context, s *appsv1.StatefulSet, ordinal int) error {
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"spec":{"updateStrategy":{"rollingUpdate":{"partition":%d}}}}`, s.ResourceVersion, ordinal)
	if _, err := c.cfg.Kube.AppsV1().StatefulSets(s.Namespace).Patch(ctx, s.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("lower the partition of StatefulSet %s/%s to %d: %w", s.Namespace, s.Name, ordinal, err)
	}
	return nil
}

// release gives each held StatefulSet its own partition back and drops
// the rollout annotation: every pod is current.
func (c *Controller) release(ctx context.Context, sets []*appsv1.StatefulSet) error {
	for _, s := range sets {
		ours, restore, _ := v1.RolloutOf(s)
		if !ours {
			continue
		}
		spec := ""
		if !onDelete(s) {
			p := "null"
			// The annotation is the tenant's to write too: a value no
			// partition can hold would fail this patch at every sync,
			// and the rollout would never end.
			if n, err := strconv.ParseInt(restore, 10, 32); err == nil && n > 0 {
				p = strconv.FormatInt(n, 10)
			}
			spec = fmt.Sprintf(`,"spec":{"updateStrategy":{"rollingUpdate":{"partition":%s}}}`, p)
		}
		patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"annotations":{%q:null}}%s}`, s.ResourceVersion, v1.RolloutAnnotation, spec)
		if _, err := c.cfg.Kube.AppsV1().StatefulSets(s.Namespace).Patch(ctx, s.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("end the rollout of StatefulSet %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}

// settings are the ObjectStore's spec.restarts, or the operator's.
func (c *Controller) settings(store *v1.ObjectStore) (int, time.Duration) {
	maxUnavailable, timeout := c.cfg.MaxUnavailable, c.cfg.PodTimeout
	if r := store.Spec.Restarts; r != nil {
		if r.MaxUnavailable > 0 {
			maxUnavailable = int(r.MaxUnavailable)
		}
		if d, err := time.ParseDuration(r.PodTimeout); err == nil && d > 0 {
			timeout = d
		}
	}
	return maxUnavailable, timeout
}

// podsOf are the namespace's StatefulSet pods by name.
func (c *Controller) podsOf(namespace string) map[string]*corev1.Pod {
	objs, _ := c.pods.ByIndex(cache.NamespaceIndex, namespace)
	pods := make(map[string]*corev1.Pod, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods[p.Name] = p
		}
	}
	return pods
}

func (c *Controller) condition(ctx context.Context, u *unstructured.Unstructured, s metav1.ConditionStatus, r, msg string) error {
	_, err := c.status.SetCondition(ctx, u, metav1.Condition{Type: v1.ConditionPodsCurrent, Status: s, Reason: r, Message: msg})
	return err
}
