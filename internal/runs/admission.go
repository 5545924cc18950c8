package runs

import (
	"context"
	"time"
)

// Admission is the check that let a durable run's tool call act: the lease epoch of the execution
// that dispatched it, and the moment, on this process's clock, at which that execution was known
// to still hold the run. The moment is always before any other execution could take the run over.
//
// The check is the last one Loupe makes: a process paused after it (SIGSTOP, a frozen VM) runs the
// tool late, possibly after another execution took the run over and completed the same call. That
// late act carries the same idempotency key, and its result is kept as superseded, never as the
// run's; only the system the tool acts on can refuse it, by that key. The crash harness reads the
// admission from the tools' context to tell such a late act from a call dispatched again.
type Admission struct {
	Epoch int64
	At    time.Time
}

type admissionKey struct{}

func withAdmission(ctx context.Context, a Admission) context.Context {
	return context.WithValue(ctx, admissionKey{}, a)
}

// AdmissionOf returns the admission of the tool call running under ctx, if a durable run's
// execution dispatched it.
func AdmissionOf(ctx context.Context) (Admission, bool) {
	a, ok := ctx.Value(admissionKey{}).(Admission)
	return a, ok
}
