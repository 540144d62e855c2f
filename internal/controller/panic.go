package controller

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// ReasonInternalError is the condition reason of an ObjectStore whose sync
// panicked: a bug of the operator, met on this object's input.
const ReasonInternalError = "InternalError"

// PanicError is a panic recovered from a sync, with the stack where it
// happened. Run hands it to onError like any failure, so the key is
// requeued with backoff and every other key carries on.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("sync panicked: %v", e.Value) }

// Recovering calls f and turns a panic into a *PanicError: one object's
// input must never take the process, and with it every other tenant's
// certificates and updates, down. client-go's HandleCrash would log and
// re-panic; this keeps the worker. Work a sync hands to a goroutine of its
// own (a pull, an update call) runs under it too, and its *PanicError
// comes back to a sync, which returns it to HandlePanics.
func Recovering(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return f()
}

// HandlePanics returns an onError for Run: a recovered panic is logged
// with its stack and the key, counted, and reported with report (the
// controller's condition, reason ReasonInternalError); every error, the
// panic included, then goes to next (nil: nothing more).
func HandlePanics(panics prometheus.Counter, log zerolog.Logger, report func(key, message string), next func(key string, err error)) func(string, error) {
	return func(key string, err error) {
		if p := (*PanicError)(nil); errors.As(err, &p) {
			panics.Inc()
			log.Error().Str("objectstore", key).Str("reason", ReasonInternalError).Str("panic", fmt.Sprint(p.Value)).
				Bytes("stack", p.Stack).Msg("sync panicked; the object is retried with backoff, the others carry on")
			if report != nil {
				report(key, fmt.Sprintf("the operator failed on this object (%v); this is a bug of the operator, reported in its log with the stack; it is retried with backoff", p.Value))
			}
		}
		if next != nil {
			next(key, err)
		}
	}
}

// PanicCounter is objectstore_operator_sync_panics_total for controller
// name on reg. The metric is registered once, whichever controller comes
// first; the others share it.
func PanicCounter(reg prometheus.Registerer, name string) prometheus.Counter {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "objectstore_operator_sync_panics_total",
		Help: "Panics recovered from syncs, by controller: each is a bug, logged with its stack; the object is retried and reported InternalError.",
	}, []string{"controller"})
	if reg != nil {
		if err := reg.Register(vec); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err) // two metrics of one name and other labels: a programming error at start
			}
			vec = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return vec.WithLabelValues(name)
}
