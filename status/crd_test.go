package status

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestMaxMessageIsTheCRDs: the CRD is where a condition's message is
// bounded; MaxMessage must say the same, or the apiserver refuses a whole
// status the operator thought it had cut to size.
func TestMaxMessageIsTheCRDs(t *testing.T) {
	b, err := os.ReadFile("../helm/object-store-operator/crds/objectstores.aistor.min.io.yaml")
	require.NoError(t, err)
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]struct {
								Items struct {
									Properties map[string]struct {
										MaxLength *int `json:"maxLength"`
									} `json:"properties"`
								} `json:"items"`
							} `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &crd))
	require.NotEmpty(t, crd.Spec.Versions)
	for _, v := range crd.Spec.Versions {
		limit := v.Schema.OpenAPIV3Schema.Properties["status"].Properties["conditions"].Items.Properties["message"].MaxLength
		require.NotNil(t, limit, "the CRD bounds status.conditions[].message")
		require.Equal(t, *limit, MaxMessage)
	}
}
