package updates

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// storeWithBinary is an ObjectStore at generation gen on imgNew whose
// status carries what the binary source wrote: BinaryAvailable of status
// st observed at condGen, and bin.
func storeWithBinary(gen, condGen int64, st metav1.ConditionStatus, reason string, bin *v1.BinaryStatus) *v1.ObjectStore {
	s := &v1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "t", Generation: gen}, Spec: v1.ObjectStoreSpec{Image: imgNew}}
	s.Status.Binary = bin
	if st != "" {
		s.Status.Conditions = []metav1.Condition{{Type: v1.ConditionBinaryAvailable, Status: st, Reason: reason, ObservedGeneration: condGen}}
	}
	return s
}

// TestTheBinaryIsReadFromTheStatusForTheImageTheSpecNames: the binary
// source's status is the updater's only word on the binary, and it is
// taken only when it speaks of the image the spec names now.
func TestTheBinaryIsReadFromTheStatusForTheImageTheSpecNames(t *testing.T) {
	url := updateBase + "/sha256/" + newSHA + "/minio." + relNew + ".sha256sum"
	mine := &v1.BinaryStatus{Image: imgNew, Release: relNew, SHA256: newSHA, Platform: "linux-amd64", URL: url}
	before := &v1.BinaryStatus{Image: "minio/aistor:old", Release: relOld, SHA256: newSHA, URL: url}
	legacy := &v1.BinaryStatus{Release: relNew, SHA256: newSHA, URL: url} // written before status.binary.image
	for _, tc := range []struct {
		name  string
		store *v1.ObjectStore
		want  binaryState
	}{
		{name: "nothing written yet: unresolved", store: storeWithBinary(1, 0, "", "", nil)},
		{name: "available for this image", store: storeWithBinary(1, 1, metav1.ConditionTrue, "Available", mine),
			want: binaryState{resolved: true, available: true, release: relNew, reason: "Available"}},
		{name: "another field edited since: still this image's", store: storeWithBinary(2, 1, metav1.ConditionTrue, "Available", mine),
			want: binaryState{resolved: true, available: true, release: relNew, reason: "Available"}},
		{name: "spec.image edited since: unresolved", store: storeWithBinary(2, 1, metav1.ConditionTrue, "Available", before)},
		{name: "unavailable for this generation", store: storeWithBinary(2, 2, metav1.ConditionFalse, "ImageNotFound", nil),
			want: binaryState{resolved: true, reason: "ImageNotFound"}},
		{name: "unavailable, observed before an edit: unresolved", store: storeWithBinary(2, 1, metav1.ConditionFalse, "ImageNotFound", nil)},
		{name: "a pull failing again keeps the binary named", store: storeWithBinary(1, 1, metav1.ConditionFalse, "PullFailed", mine),
			want: binaryState{resolved: true, reason: "PullFailed"}},
		{name: "status.binary without its image, this generation's", store: storeWithBinary(1, 1, metav1.ConditionTrue, "Available", legacy),
			want: binaryState{resolved: true, available: true, release: relNew, reason: "Available"}},
		{name: "status.binary without its image, an older generation's", store: storeWithBinary(2, 1, metav1.ConditionTrue, "Available", legacy)},
		{name: "available and no binary named: unresolved", store: storeWithBinary(1, 1, metav1.ConditionTrue, "Available", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := binaryOf(tc.store)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestMinIOIsGivenTheURLTheStatusNames: the digest URL of the tenant's
// own bytes, as status.binary names it; never a URL for a release it does
// not name.
func TestMinIOIsGivenTheURLTheStatusNames(t *testing.T) {
	url := updateBase + "/sha256/" + newSHA + "/minio." + relNew + ".sha256sum"
	bin := &v1.BinaryStatus{Image: imgNew, Release: relNew, SHA256: newSHA, Platform: "linux-amd64", URL: url}
	got, err := updateURL(updateBase, imgNew, bin, relNew)
	require.NoError(t, err)
	assert.Equal(t, url, got)
	_, err = updateURL(updateBase, imgNew, bin, relOld)
	assert.ErrorContains(t, err, "not "+relOld, "an update recorded for another release")
	_, err = updateURL(updateBase, imgNew, nil, relNew)
	assert.Error(t, err)
	_, err = updateURL(updateBase, imgNew, &v1.BinaryStatus{Image: imgNew, Release: relNew}, relNew)
	assert.Error(t, err, "no URL")
	for _, foreign := range []string{"http://attacker.example/webhook/v1/update/x.sha256sum", updateBase + "evil/x.sha256sum", "https://op.ops.svc:4221@attacker/x"} {
		_, err = updateURL(updateBase, imgNew, &v1.BinaryStatus{Image: imgNew, Release: relNew, URL: foreign}, relNew)
		assert.ErrorContains(t, err, "not below the operator's upgrade server", foreign)
	}
	_, err = updateURL("", imgNew, bin, relNew)
	assert.Error(t, err, "no base: no URL is the operator's")
}

// TestABinarySourceWriteQueuesTheObjectStore: what the binary source
// writes is news to the updater; its own writes and another condition's
// message are not.
func TestABinarySourceWriteQueuesTheObjectStore(t *testing.T) {
	bin := &v1.BinaryStatus{Image: imgNew, Release: relNew, SHA256: newSHA, URL: "u"}
	base := storeWithBinary(1, 1, metav1.ConditionTrue, "Available", bin)
	clone := func() *v1.ObjectStore {
		c := *base
		c.Status.Conditions = slices.Clone(base.Status.Conditions)
		b := *bin
		c.Status.Binary = &b
		return &c
	}
	assert.False(t, binaryChanged(base, clone()))

	other := clone()
	other.Status.Release, other.Status.UpdatePhase = relNew, "Current"
	other.Status.Conditions = append(other.Status.Conditions, metav1.Condition{Type: v1.ConditionVersionCurrent, Status: metav1.ConditionTrue})
	assert.False(t, binaryChanged(base, other), "the updater's own write")

	for name, change := range map[string]func(s *v1.ObjectStore){
		"the binary's bytes":    func(s *v1.ObjectStore) { s.Status.Binary.SHA256 = "other" },
		"the binary's platform": func(s *v1.ObjectStore) { s.Status.Binary.Platform = "linux-arm64" },
		"no binary":             func(s *v1.ObjectStore) { s.Status.Binary = nil },
		"the condition's status": func(s *v1.ObjectStore) {
			s.Status.Conditions[0].Status, s.Status.Conditions[0].Reason = metav1.ConditionFalse, "PullFailed"
		},
		"the condition's generation": func(s *v1.ObjectStore) { s.Status.Conditions[0].ObservedGeneration = 2 },
		"no condition":               func(s *v1.ObjectStore) { s.Status.Conditions = nil },
	} {
		changed := clone()
		change(changed)
		assert.True(t, binaryChanged(base, changed), name)
	}
}
