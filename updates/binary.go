package updates

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// What the binary source resolved spec.image to reaches this controller
// through the ObjectStore's status alone: status.binary (the release, its
// bytes, its platform and the URL it is served at) and the BinaryAvailable
// condition, both written by the binary source and read here from the
// informer. Nothing else passes between the two controllers: a change to
// either field queues the ObjectStore (binaryChanged), as a spec change
// does.

// binaryOf reads the binary source's word on the image the spec names
// now, and the binary it named for it (nil: none). A BinaryAvailable
// condition observed for an older generation still speaks of this image
// when status.binary was resolved from it (an edit of another field);
// otherwise the image is not resolved yet (an edit of spec.image).
func binaryOf(store *v1.ObjectStore) (binaryState, *v1.BinaryStatus) {
	cond := meta.FindStatusCondition(store.Status.Conditions, v1.ConditionBinaryAvailable)
	if cond == nil {
		return binaryState{}, nil
	}
	current := cond.ObservedGeneration == store.Generation
	bin := store.Status.Binary
	// A status.binary without its image was written before the field
	// existed: it is this image's when the condition is this generation's.
	if bin != nil && bin.Image != store.Spec.Image && (bin.Image != "" || !current) {
		bin = nil
	}
	if !current && bin == nil {
		return binaryState{}, nil
	}
	b := binaryState{resolved: true, available: cond.Status == metav1.ConditionTrue, reason: cond.Reason}
	if b.available {
		if bin == nil {
			// Available, and the binary not named yet: as unresolved.
			return binaryState{}, nil
		}
		b.release = bin.Release
	}
	return b, bin
}

// updateURL is the .sha256sum URL MinIO is given for release: the one
// status.binary names, which every replica serves with exactly those
// bytes or not at all. A release status.binary does not name (an update
// recorded for what the image resolved to before) has none, and a URL
// that is not below the upgrade server's base was not written by the
// binary source (which writes only below it): whoever can write the
// status subresource must not choose where MinIO fetches its binary.
func updateURL(base, image string, bin *v1.BinaryStatus, release string) (string, error) {
	switch {
	case bin != nil && bin.URL != "" && (base == "" || !strings.HasPrefix(bin.URL, strings.TrimSuffix(base, "/")+"/")):
		return "", fmt.Errorf("status.binary.url %q is not below the operator's upgrade server (%s): it was not written by the operator, and MinIO is never sent elsewhere", cut(bin.URL, 256), base)
	case bin == nil:
		return "", fmt.Errorf("status.binary names no binary of %s for %s", release, image)
	case bin.Release != release:
		return "", fmt.Errorf("status.binary names %s for %s, not %s", bin.Release, image, release)
	case bin.URL == "":
		return "", fmt.Errorf("status.binary names no URL for %s", release)
	}
	return bin.URL, nil
}

// binaryChanged tells whether the binary source's fields differ between
// two versions of an ObjectStore.
func binaryChanged(old, obj *v1.ObjectStore) bool {
	a, b := old.Status.Binary, obj.Status.Binary
	if (a == nil) != (b == nil) || (a != nil && *a != *b) {
		return true
	}
	ca := meta.FindStatusCondition(old.Status.Conditions, v1.ConditionBinaryAvailable)
	cb := meta.FindStatusCondition(obj.Status.Conditions, v1.ConditionBinaryAvailable)
	if ca == nil || cb == nil {
		return (ca == nil) != (cb == nil)
	}
	return ca.Status != cb.Status || ca.Reason != cb.Reason || ca.ObservedGeneration != cb.ObservedGeneration
}
