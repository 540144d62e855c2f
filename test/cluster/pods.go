package cluster

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podDriver stands in for kubelets: this control plane has no nodes, so it
// marks every pod Running and Ready as soon as it exists. The statefulset
// controller then creates, replaces and rolls pods as it would on a real
// cluster (new UIDs, the new template), which is what tests look at.
// Pods stay unscheduled, so the apiserver deletes them at once.
type podDriver struct {
	client kubernetes.Interface
	log    io.Writer
}

func (d *podDriver) run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(d.client, 0)
	pods := factory.Core().V1().Pods().Informer()
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
	if !ok || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodRunning {
		return
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
