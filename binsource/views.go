package binsource

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/binstore"
)

// A tenant's own URL, sha256/<hex>/<component>/minio.<RELEASE>, is a view
// of a stored binary the store keeps in memory (binstore.Store.Publish):
// the component only its ObjectStore's status carries, and the
// provenance and signature made for it.

// publish gives the ObjectStore its own view of every private binary
// (pulled with its credentials) and of every binary its image shipped
// unsigned (signed with the platform key for it), at
// sha256/<hex>/<component>/, and returns the binaries it is to be served
// with (the views in their place) and the views' URL paths. Other
// binaries are served at their digest paths as they are.
func (c *Controller) publish(store *v1.ObjectStore, binaries []*binstore.Binary, unsigned []bool) ([]*binstore.Binary, []string, error) {
	out := make([]*binstore.Binary, 0, len(binaries))
	var published []string
	st := c.cfg.Fetcher.cfg.Store
	for i, b := range binaries {
		// A binary from an image that shipped no signature gets one the
		// platform key makes for this ObjectStore alone (its trusted
		// comment names it): a signature made for another tenant (or
		// another image's) is never served at this one's URL.
		sign := i < len(unsigned) && unsigned[i] && st.Signs()
		if !b.Private() && !sign {
			out = append(out, b)
			continue
		}
		if len(c.cfg.URLKey) == 0 {
			return nil, nil, reasonf(errPull, "minio.%s needs a URL of the ObjectStore's own, and this operator has no URL key", b.Release)
		}
		src := binstore.Source{}
		if b.Source != nil {
			src = *b.Source
		}
		src.ObjectStore = store.Namespace + "/" + store.Name
		own, err := st.Publish(b, component(c.cfg.URLKey, b.SHA256, string(store.UID)), src, sign)
		if err != nil {
			return nil, nil, reasonf(errPull, "publish minio.%s for %s/%s: %v", b.Release, store.Namespace, store.Name, err)
		}
		out = append(out, own)
		published = append(published, own.URLPath())
	}
	return out, published, nil
}

// component is the part of a private binary's URL only its ObjectStore is
// given: HMAC-SHA256 of the binary's digest and the ObjectStore's UID under
// the replicas' shared URL key, so it cannot be derived from anything
// public (the digest, the release, the ObjectStore's name), differs for
// every ObjectStore (a recreated one, with a new UID, gets a new URL), and
// every replica derives the same one.
func component(key []byte, digest, uid string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("object-store-operator binary URL v1\x00" + digest + "\x00" + uid))
	return hex.EncodeToString(mac.Sum(nil))
}
