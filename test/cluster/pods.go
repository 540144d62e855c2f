package cluster

import (
	"context"
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// podDriver stands in for kubelets: this control plane has no nodes, so it
// marks every pod Running and Ready as soon as it exists. The statefulset
// controller then creates, replaces and rolls pods as it would on a real
// cluster (new UIDs, the new template), which is what tests look at.
// Pods stay unscheduled, so the apiserver deletes them at once; except
// that a pod with a nodeSelector is bound to the first Node (by name) a
// test created that matches it, and, bound, is deleted at once by the
// driver when its deletion starts, as a kubelet would after it stopped.
// OwnKubeletLabel on a pod leaves it to the test that labelled it: that
// test runs what the pod would run (a MinIO node, say) and reports it
// Ready itself.
const OwnKubeletLabel = "e2e.object-store-operator/kubelet"

type podDriver struct {
	client kubernetes.Interface
	log    io.Writer
	nodes  corelisters.NodeLister
}

func (d *podDriver) run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(d.client, 0)
	pods := factory.Core().V1().Pods().Informer()
	d.nodes = factory.Core().V1().Nodes().Lister()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.start(ctx, obj) },
		UpdateFunc: func(_, obj any) { d.start(ctx, obj) },
	}); err != nil {
		return fmt.Errorf("pod driver: %w", err)
	}
	factory.Start(ctx.Done())
	return nil
}

// start reports the pod Running and Ready, once.
func (d *podDriver) start(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if ok && pod.Labels[OwnKubeletLabel] != "" {
		return
	}
	if ok && pod.DeletionTimestamp != nil && pod.Spec.NodeName != "" {
		err := d.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			fmt.Fprintf(d.log, "pod driver: delete %s/%s: %v\n", pod.Namespace, pod.Name, err)
		}
		return
	}
	if !ok || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodRunning {
		return
	}
	if pod.Spec.NodeName == "" && len(pod.Spec.NodeSelector) > 0 {
		if node := d.nodeFor(ctx, pod); node != "" {
			err := d.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: node},
			}, metav1.CreateOptions{})
			// A conflict is an event of a pod since replaced under its name
			// (the binding names its UID): the new pod's event binds it.
			if err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
				fmt.Fprintf(d.log, "pod driver: bind %s/%s to %s: %v\n", pod.Namespace, pod.Name, node, err)
			}
			return // the binding's update event starts it
		}
	}
	now := metav1.Now()
	pod = pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.PodIP, pod.Status.HostIP = "127.0.0.1", "127.0.0.1"
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: new(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if _, err := d.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
		// The next event (or the statefulset controller's retry) tries again.
		fmt.Fprintf(d.log, "pod driver: start %s/%s: %v\n", pod.Namespace, pod.Name, err)
	}
}

// nodeFor returns the first Node, by name, whose labels match the pod's
// nodeSelector; "" when none does. The apiserver is asked when the cache
// has none: the Node's event may trail the pod's.
func (d *podDriver) nodeFor(ctx context.Context, pod *corev1.Pod) string {
	sel := labels.SelectorFromSet(pod.Spec.NodeSelector)
	var names []string
	if nodes, err := d.nodes.List(sel); err == nil {
		for _, n := range nodes {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		list, err := d.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return ""
		}
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return slices.Min(names)
}
