package autocert

import (
	"context"
	"strings"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DetectSigner returns EKSSigner on EKS (told by its node labels or
// kubelet versions) and DefaultSigner elsewhere, including when the
// operator may not list nodes. An apiserver that does not answer is asked
// again (1 s doubling to 30 s) until it does or ctx ends: a guess made
// during an outage would last for the life of the process.
func DetectSigner(ctx context.Context, client kubernetes.Interface, log zerolog.Logger) string {
	return detectSigner(ctx, client, log, time.Second)
}

func detectSigner(ctx context.Context, client kubernetes.Interface, log zerolog.Logger, backoff time.Duration) string {
	var nodes *corev1.NodeList
	for {
		var err error
		nodes, err = client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 5})
		if err == nil {
			break
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) {
			log.Debug().Err(err).Msg("cannot list nodes to detect EKS; using " + DefaultSigner)
			return DefaultSigner
		}
		log.Warn().Err(err).Stringer("retryIn", backoff).Msg("cannot reach the apiserver to detect the CSR signer; retrying")
		select {
		case <-ctx.Done():
			return DefaultSigner
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
	for _, n := range nodes.Items {
		_, group := n.Labels["eks.amazonaws.com/nodegroup"]
		_, compute := n.Labels["eks.amazonaws.com/compute-type"]
		if group || compute || strings.Contains(n.Status.NodeInfo.KubeletVersion, "-eks-") {
			log.Info().Str("node", n.Name).Msg("EKS detected: using signer " + EKSSigner)
			return EKSSigner
		}
	}
	return DefaultSigner
}
