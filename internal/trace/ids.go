package trace

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/engine"
)

// IDGenerator makes random trace and span ids, except for a root span whose context asks for
// given ids (engine.WithRootSpanIDs): every execution of a durable run then shares one root span.
// Loupe's Provider uses it; give it to any other SDK TracerProvider with sdktrace.WithIDGenerator.
type IDGenerator struct{}

// NewIDs returns the ids of a new root span.
func (IDGenerator) NewIDs(ctx context.Context) (oteltrace.TraceID, oteltrace.SpanID) {
	if tid, sid, ok := engine.RootSpanIDs(ctx); ok {
		return tid, sid
	}
	var tid oteltrace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, newSpanID()
}

// NewSpanID returns the id of a new child span.
func (IDGenerator) NewSpanID(context.Context, oteltrace.TraceID) oteltrace.SpanID { return newSpanID() }

func newSpanID() oteltrace.SpanID {
	var sid oteltrace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
