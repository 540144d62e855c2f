package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates the CRDs in the given files or directories and waits
// until they are established. It runs before kube-controller-manager
// starts, so the garbage collector knows the types from the beginning
// instead of discovering them up to 30 s later.
func (c *Cluster) installCRDs(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	var names []string
	for _, p := range paths {
		files := []string{p}
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			files, _ = filepath.Glob(filepath.Join(p, "*.yaml"))
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("read CRD %s: %w", f, err)
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
			for {
				var u unstructured.Unstructured
				if err := dec.Decode(&u.Object); err != nil {
					if errors.Is(err, io.EOF) {
						break
					}
					return fmt.Errorf("decode %s: %w", f, err)
				}
				if len(u.Object) == 0 {
					continue
				}
				if _, err := dyn.Resource(crdResource).Create(ctx, &u, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("create CRD %s from %s: %w", u.GetName(), f, err)
				}
				names = append(names, u.GetName())
			}
		}
	}
	for _, name := range names {
		if err := waitEstablished(ctx, dyn, name); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		u, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && strings.EqualFold(fmt.Sprint(m["status"]), "True") {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
