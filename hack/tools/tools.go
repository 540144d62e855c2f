//go:build tools

// Package tools pins the binaries of the local control plane. They are built
// into bin/ by `make tools`; nothing here is linked into the operator.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
