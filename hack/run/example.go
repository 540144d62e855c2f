package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/object-store-operator/operator/api/v1"
)

// examplePath is the example tenant of the docs, relative to the
// repository: make run applies it, so it cannot drift from what works.
const examplePath = "docs/examples/tenant.yaml"

// example is the example tenant's objects, and what make run reads of them.
type example struct {
	objects []*unstructured.Unstructured
	// namespace and name of its ObjectStore.
	namespace, name string
	// user and password from its configuration Secret's config.env.
	user, password string
}

// loadExample reads the example tenant from root.
func loadExample(root string) (*example, error) {
	b, err := os.ReadFile(filepath.Join(root, examplePath))
	if err != nil {
		return nil, err
	}
	return parseExample(b)
}

func parseExample(b []byte) (*example, error) {
	ex := &example{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", examplePath, err)
		}
		if obj != nil {
			ex.objects = append(ex.objects, &unstructured.Unstructured{Object: obj})
		}
	}
	store := ex.find(apiv1.Kind, "")
	if store == nil {
		return nil, fmt.Errorf("%s: no ObjectStore", examplePath)
	}
	ex.namespace, ex.name = store.GetNamespace(), store.GetName()
	config, _, _ := unstructured.NestedString(store.Object, "spec", "configuration", "name")
	secret := ex.find("Secret", config)
	if secret == nil {
		return nil, fmt.Errorf("%s: no configuration Secret %q", examplePath, config)
	}
	env, _, _ := unstructured.NestedString(secret.Object, "stringData", apiv1.ConfigEnvKey)
	for line := range strings.SplitSeq(env, "\n") {
		name, value, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		value = strings.Trim(value, `"'`)
		switch {
		case !ok:
		case name == "MINIO_ROOT_USER":
			ex.user = value
		case name == "MINIO_ROOT_PASSWORD":
			ex.password = value
		}
	}
	if ex.user == "" || ex.password == "" {
		return nil, fmt.Errorf("%s: Secret %s has no MINIO_ROOT_USER and MINIO_ROOT_PASSWORD in %s", examplePath, config, apiv1.ConfigEnvKey)
	}
	return ex, nil
}

// find returns the example's object of kind (and name, when not empty).
func (ex *example) find(kind, name string) *unstructured.Unstructured {
	for _, o := range ex.objects {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

// forMakeRun returns the example as make run applies it: its MinIO runs on
// loopback from make run's registry, so the ObjectStore's and the minio
// containers' image is image and the admin endpoint is on loopback;
// everything else is applied as written.
func (ex *example) forMakeRun(image, endpoint string) (string, error) {
	var out strings.Builder
	for _, o := range ex.objects {
		o = o.DeepCopy()
		switch o.GetKind() {
		case apiv1.Kind:
			if err := unstructured.SetNestedField(o.Object, image, "spec", "image"); err != nil {
				return "", err
			}
			if err := unstructured.SetNestedField(o.Object, endpoint, "spec", "updates", "endpoint"); err != nil {
				return "", err
			}
		case "StatefulSet":
			containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if err != nil {
				return "", err
			}
			for _, c := range containers {
				if c := c.(map[string]any); c["name"] == "minio" {
					c["image"] = image
				}
			}
			if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				return "", err
			}
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return "", err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.String(), nil
}
