package updates

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
)

// The failure budget. An in-place update to a release fails when a
// recorded call (status.update) ends in a rolling update or UpdateFailed
// because MinIO refused or failed it (CauseInPlaceRefused) or its nodes
// did not run the release within the update's timeout
// (CauseNodesNotUpdated). A tenant that does not answer or whose endpoint
// is refused (before or at the call) says nothing about the release and
// does not count; nor does an update abandoned because spec.image changed.
// Failures count once per unit (units.go: the namespace by default, a
// labelled tenant's namespaces together, or each ObjectStore): one
// tenant, however many ObjectStores it has, cannot halt the fleet's
// updates alone. When budget units have failed with no success in
// between, the release is halted: no update to it starts anywhere until
// the record is deleted, or, for one ObjectStore, its
// ResumeUpdatesAnnotation names the release. Successes count once per
// unit too: a success drops its unit's failure, and successes in budget
// units before the halt clear the release's failures (and prove it);
// after the halt, only a resume does. Until updates to a release have
// succeeded, no more units than the budget have an update to it in
// flight or failed at once (see firstLimit): a release that fails
// everywhere reaches budget tenants.
//
// The record is a Lease in the operator's namespace (the chart's Role
// already lets the operator get, create and update Leases there; the
// admission policy holds it to them), its annotation haltAnnotation a
// JSON map from release to haltEntry. It survives restarts and leader
// changes; the leader reads it at most every haltRefresh. A failure
// names its unit only when it is not the ObjectStore's namespace, so a
// record written per namespace (as before units, and still by default)
// reads as it did, both ways.

// HaltRecordName is the Lease that holds the failure budget's record.
const HaltRecordName = "object-store-operator-update-halts"

// haltAnnotation holds the record, JSON.
const haltAnnotation = "aistor.min.io/update-failures"

// Bounds of the record: an annotation holds at most 256 KiB, and every
// word in it came from a tenant (MinIO's error).
const (
	maxHaltReleases = 32
	maxHaltMessage  = 256
	// maxUnitReleases bounds the releases not halted in which one unit
	// has a failure: its failure of another release drops its oldest.
	// Otherwise one tenant, failing release after release, filled the
	// record and evicted the failures the others had counted.
	maxUnitReleases = 4
	// maxHaltBytes bounds the record as written: JSON escapes a tenant's
	// "<" to six bytes, and the apiserver refuses a Lease whose
	// annotations pass 256 KiB (every later write of the record would be
	// refused). Releases are evicted, as by maxHaltReleases, to fit.
	maxHaltBytes = 192 * 1024
	// MaxFailureBudget bounds the budget, so that one release's entry
	// alone (a failure of each of budget units, and as many successes)
	// fits maxHaltBytes: about 2.6 KiB a unit at most (a 317-byte key,
	// named again as its unit, and 256 bytes of "<" escaped six-fold).
	MaxFailureBudget = 64
)

// haltRefresh is how often the leader reads the record again: how soon a
// deleted record resumes updates.
const haltRefresh = 10 * time.Second

// ReasonUpdatesHalted: the failure budget of the release is spent.
const ReasonUpdatesHalted = "UpdatesHalted"

// haltEntry is one release's failures.
type haltEntry struct {
	// Halted is when the budget was spent (zero: not halted).
	Halted *metav1.Time `json:"halted,omitempty"`
	// Proven is when an update to the release last succeeded.
	Proven   *metav1.Time `json:"proven,omitempty"`
	Failures []failure    `json:"failures,omitempty"`
	// Succeeded are the units whose update to the release succeeded
	// since its failures were last cleared (or it was proven): budget of
	// them clear the failures, as budget failures halt. At most budget.
	// Before units, namespaces: a namespace is a unit's name.
	Succeeded []string `json:"succeeded,omitempty"`
}

// failure is one unit's failed update to a release.
type failure struct {
	ObjectStore string `json:"objectStore"`
	// Unit is the unit the failure counts against, when it is not the
	// ObjectStore's namespace.
	Unit    string      `json:"unit,omitempty"`
	Cause   string      `json:"cause"`
	Message string      `json:"message"`
	At      metav1.Time `json:"at"`
}

// unit is the unit f counts against.
func (f failure) unit() string {
	if f.Unit != "" {
		return f.Unit
	}
	ns, _, _ := strings.Cut(f.ObjectStore, "/")
	return ns
}

// newFailure is key's failure, counted against unit.
func newFailure(key, unit, cause, message string, at metav1.Time) failure {
	f := failure{ObjectStore: key, Cause: cause, Message: cut(message, maxHaltMessage), At: at}
	if ns, _, _ := strings.Cut(key, "/"); unit != ns {
		f.Unit = unit
	}
	return f
}

// sameParty: old was counted against unit, or is key's own (a key whose
// unit changed since, as when the platform labels its namespace, counts
// once all the same).
func sameParty(old failure, key, unit string) bool {
	return old.unit() == unit || old.ObjectStore == key
}

// halts keeps the record.
type halts struct {
	budget    int // 0: no budget
	client    kubernetes.Interface
	namespace string
	clock     clock.PassiveClock
	gauge     *prometheus.GaugeVec

	mu     sync.Mutex
	record map[string]haltEntry
	read   time.Time // when the record was last read; zero: never
}

func newHalts(budget int, client kubernetes.Interface, namespace string, clk clock.PassiveClock, reg prometheus.Registerer) *halts {
	h := &halts{budget: budget, client: client, namespace: namespace, clock: clk,
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "objectstore_operator_updates_halted",
			Help: "1 while in-place updates to the release are halted by the failure budget, 0 while it has failures but is not halted; only releases in the halt record.",
		}, []string{"release"})}
	if reg != nil {
		reg.MustRegister(h.gauge)
	}
	return h
}

// haltState is what decide knows of a release's budget.
type haltState struct {
	// proven: an update to the release succeeded (and the record kept it).
	proven bool
	// failed is how many units failed it since; failedUnits names
	// them.
	failed      int
	failedUnits []string
	halted      bool
	// list is the failures, when halted: describeFailuresFor words them
	// for one tenant.
	list  []failure
	since time.Time
}

// state reads release's state, reading the record again when it is older
// than haltRefresh (or force).
func (h *halts) state(ctx context.Context, release string) (haltState, error) {
	if h == nil || h.budget <= 0 || release == "" {
		return haltState{}, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.read.IsZero() || h.clock.Since(h.read) >= haltRefresh {
		rec, _, err := h.get(ctx)
		if err != nil {
			return haltState{}, err
		}
		h.setLocked(rec)
	}
	return stateOf(h.record[release]), nil
}

func stateOf(e haltEntry) haltState {
	st := haltState{proven: e.Proven != nil, failed: len(e.Failures)}
	for _, f := range e.Failures {
		st.failedUnits = append(st.failedUnits, f.unit())
	}
	if e.Halted != nil {
		st.halted, st.list, st.since = true, slices.Clone(e.Failures), e.Halted.Time
	}
	return st
}

// cached is release's state as last read or written by this process, no
// API request; without a record, have.
func (h *halts) cached(release string, have haltState) haltState {
	if h == nil || h.budget <= 0 {
		return have
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.record == nil {
		return have
	}
	return stateOf(h.record[release])
}

// lead forgets what was read: a new term reads the record afresh.
func (h *halts) lead() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.read = time.Time{}
	h.mu.Unlock()
}

// describeFailuresFor says why the units failed, for the tenant in
// namespace ns: its own namespace's failures are quoted, the others only
// counted by cause. Another tenant's failure message is its MinIO's
// words, and its ObjectStore's name its own: neither goes into this
// tenant's condition or Event. Per namespace even when a labelled
// tenant's namespaces are one unit (units.go): they share a budget, not
// necessarily readers. The platform reads them all in the halt record
// and the operator's log (describeFailures).
func describeFailuresFor(fs []failure, ns string) string {
	var causes, own []string
	for _, f := range fs {
		if !slices.Contains(causes, f.Cause) {
			causes = append(causes, f.Cause)
		}
		if fns, _, _ := strings.Cut(f.ObjectStore, "/"); fns == ns {
			own = append(own, describeFailures([]failure{f}))
		}
	}
	slices.Sort(causes)
	out := strings.Join(causes, ", ")
	if len(own) > 0 {
		out += "; this namespace's: " + strings.Join(own, "; ")
	}
	return out
}

// failedUnitsOf lists the units of fs, for counting them in words.
func failedUnitsOf(fs []failure) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.unit()
	}
	return out
}

// describeFailures says which ObjectStores failed and why: for the
// platform (the operator's log).
func describeFailures(fs []failure) string {
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%s (%s: %s)", f.ObjectStore, f.Cause, f.Message))
	}
	return strings.Join(parts, "; ")
}

// fail records a failed update of the ObjectStore key, of unit, to
// release; it reports whether this failure halted the release.
func (h *halts) fail(ctx context.Context, key, unit, release, cause, message string) (bool, haltState, error) {
	if h == nil || h.budget <= 0 || release == "" {
		return false, haltState{}, nil
	}
	now := metav1.NewTime(h.clock.Now())
	var halted bool
	var st haltState
	err := h.modify(ctx, func(rec map[string]haltEntry) bool {
		e := rec[release]
		f := newFailure(key, unit, cause, message, now)
		replaced := slices.ContainsFunc(e.Failures, func(old failure) bool { return sameParty(old, key, unit) })
		if !replaced && len(e.Failures) >= h.budget {
			return false // halted already; the record says enough
		}
		// One per unit: the latest.
		e.Failures = slices.DeleteFunc(e.Failures, func(old failure) bool { return sameParty(old, key, unit) })
		e.Succeeded = slices.DeleteFunc(e.Succeeded, func(s string) bool { return s == unit })
		e.Failures = append(e.Failures, f)
		if !replaced {
			forgetOldest(rec, unit, release)
		}
		if e.Halted == nil && len(e.Failures) >= h.budget {
			e.Halted, halted = &now, true
		}
		rec[release] = e
		st = stateOf(e)
		evict(rec, release, maxHaltReleases)
		return true
	})
	return halted, st, err
}

// succeed: the ObjectStore key's (of unit) update to release succeeded.
// Its unit's failure of the release is dropped. Once budget units have
// succeeded (with the release not halted), the release is proven (more
// than the budget's units may update to it at once) and its failures are
// cleared. One unit's success counts once, as its failure does: a
// tenant's MinIO says "success" at will, and one tenant alone must
// neither clear the failures of a release failing for the others nor
// lift the limit on its first updates for everyone.
func (h *halts) succeed(ctx context.Context, key, unit, release string) error {
	if h == nil || h.budget <= 0 {
		return nil
	}
	h.mu.Lock()
	e, ok := h.record[release]
	h.mu.Unlock()
	if ok && (e.Halted != nil || (e.Proven != nil && len(e.Failures) == 0) || slices.Contains(e.Succeeded, unit)) {
		return nil // nothing to change: no request
	}
	now := metav1.NewTime(h.clock.Now())
	return h.modify(ctx, func(rec map[string]haltEntry) bool {
		e := rec[release]
		if e.Halted != nil || (e.Proven != nil && len(e.Failures) == 0) || slices.Contains(e.Succeeded, unit) {
			return false
		}
		e.Failures = slices.DeleteFunc(e.Failures, func(f failure) bool { return sameParty(f, key, unit) })
		e.Succeeded = append(e.Succeeded, unit)
		if len(e.Succeeded) >= h.budget {
			e = haltEntry{Proven: &now}
		}
		rec[release] = e
		evict(rec, release, maxHaltReleases)
		return true
	})
}

// forgetOldest drops unit's failures of the releases not halted beyond
// the maxUnitReleases-1 it touched last, release aside; a release left
// with nothing to say is dropped.
func forgetOldest(rec map[string]haltEntry, unit, release string) {
	type held struct {
		release string
		at      time.Time
	}
	var hs []held
	for r, e := range rec {
		if r == release || e.Halted != nil {
			continue
		}
		for _, f := range e.Failures {
			if f.unit() == unit {
				hs = append(hs, held{r, f.At.Time})
			}
		}
	}
	if len(hs) < maxUnitReleases {
		return
	}
	slices.SortFunc(hs, func(a, b held) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return strings.Compare(a.release, b.release)
	})
	for _, old := range hs[maxUnitReleases-1:] {
		e := rec[old.release]
		e.Failures = slices.DeleteFunc(e.Failures, func(f failure) bool { return f.unit() == unit })
		if len(e.Failures) == 0 && e.Proven == nil && len(e.Succeeded) == 0 {
			delete(rec, old.release)
			continue
		}
		rec[old.release] = e
	}
}

// evict keeps the record within n releases: releases not halted go
// first, the least recently touched first; keep is never evicted. (An
// evicted proven release is unproven again: its first updates are
// limited again, which costs only time.)
func evict(rec map[string]haltEntry, keep string, n int) {
	for len(rec) > n && len(rec) > 1 {
		var victim string
		var at time.Time
		victimHalted := true
		for r, e := range rec {
			if r == keep {
				continue
			}
			last := lastTouched(e)
			halted := e.Halted != nil
			if victim == "" || (victimHalted && !halted) || (victimHalted == halted && last.Before(at)) {
				victim, at, victimHalted = r, last, halted
			}
		}
		delete(rec, victim)
	}
}

// newest is the release touched last (the one a change just wrote),
// which evicting to fit maxHaltBytes keeps.
func newest(rec map[string]haltEntry) string {
	var keep string
	var at time.Time
	for r, e := range rec {
		if last := lastTouched(e); keep == "" || last.After(at) {
			keep, at = r, last
		}
	}
	return keep
}

func lastTouched(e haltEntry) time.Time {
	last := time.Time{}
	if e.Proven != nil {
		last = e.Proven.Time
	}
	for _, f := range e.Failures {
		if f.At.After(last) {
			last = f.At.Time
		}
	}
	return last
}

// modify applies change to the record read from the API and writes it
// back conditional on its resourceVersion, again on a conflict.
func (h *halts) modify(ctx context.Context, change func(map[string]haltEntry) bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	leases := h.client.CoordinationV1().Leases(h.namespace)
	return clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		rec, lease, err := h.get(ctx)
		if err != nil {
			return err
		}
		if !change(rec) {
			h.setLocked(rec)
			return nil
		}
		raw, err := json.Marshal(rec)
		for err == nil && len(raw) > maxHaltBytes && len(rec) > 1 {
			evict(rec, newest(rec), len(rec)-1)
			raw, err = json.Marshal(rec)
		}
		if err != nil {
			return fmt.Errorf("encode the update halt record: %w", err)
		}
		if lease == nil {
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: HaltRecordName, Namespace: h.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "object-store-operator"}}}
			lease.Annotations = map[string]string{haltAnnotation: string(raw)}
			_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(coordinationv1.Resource("leases"), HaltRecordName, err)
			}
		} else {
			if lease.Annotations == nil {
				lease.Annotations = map[string]string{}
			}
			lease.Annotations[haltAnnotation] = string(raw)
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("write the update halt record %s/%s: %w", h.namespace, HaltRecordName, err)
		}
		h.setLocked(rec)
		return nil
	})
}

// get reads the record; a missing Lease is an empty record (nil lease).
// An annotation that does not decode is an empty record too: it is
// rewritten whole on the next failure.
func (h *halts) get(ctx context.Context) (map[string]haltEntry, *coordinationv1.Lease, error) {
	lease, err := h.client.CoordinationV1().Leases(h.namespace).Get(ctx, HaltRecordName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return map[string]haltEntry{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read the update halt record %s/%s: %w", h.namespace, HaltRecordName, err)
	}
	rec := map[string]haltEntry{}
	if raw := lease.Annotations[haltAnnotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			rec = map[string]haltEntry{}
		}
	}
	return rec, lease, nil
}

// setLocked keeps rec as the record read now and sets the gauge: one
// series per release in the record, none for others.
func (h *halts) setLocked(rec map[string]haltEntry) {
	for r := range h.record {
		if _, ok := rec[r]; !ok {
			h.gauge.DeleteLabelValues(r)
		}
	}
	for r, e := range rec {
		switch {
		case e.Halted != nil:
			h.gauge.WithLabelValues(r).Set(1)
		case len(e.Failures) > 0:
			h.gauge.WithLabelValues(r).Set(0)
		default:
			h.gauge.DeleteLabelValues(r) // proven, nothing failing
		}
	}
	h.record, h.read = rec, h.clock.Now()
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
