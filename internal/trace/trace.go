// Package trace is Loupe's tracing: the OpenTelemetry SDK setup its engine reports to (a
// TracerProvider whose processor publishes live span events and exports finished spans to
// PostgreSQL in batches), ingestion of traces from other programs (Genkit's telemetry API and
// OTLP/HTTP), reads that assemble span trees and per-turn summaries, and retention.
//
// Every span, whatever its origin, is stored as a store.Span: ids in lowercase hex, times in Unix
// nanoseconds (end 0 while running), status in OTLP's numbering (0 unset, 1 ok, 2 error),
// attributes as one JSON object, events as [{"time_unix_nano","name","attributes"}] and links as
// [{"trace_id","span_id","trace_state","attributes"}].
package trace

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/internal/store"
)

// Span attribute keys Loupe reads.
const (
	// AttrRunID carries the Loupe run a span belongs to; ingest copies it into spans.run_id.
	AttrRunID = "loupe.run.id"
	// AttrTurnIndex is the turn a span belongs to.
	AttrTurnIndex = "loupe.turn.index"
	// AttrLinkType says why a link exists; ResumeLink sets it to LinkTypeResume.
	AttrLinkType = "loupe.link.type"
	// LinkTypeResume marks a link from a resumed turn to the turn that was interrupted.
	LinkTypeResume = "resume"
)

// InputError is a request the client got wrong: malformed JSON or protobuf, an invalid id. Its
// message names the problem; the server answers it with 400.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// printable is s as it is when every character of it prints, and quoted in Go syntax otherwise.
// The decoders' messages can quote the client's bytes raw (the OTLP JSON decoder shows the
// context of a syntax error), and an InputError's message goes to a log line and to the client.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// IsInputError reports whether err is the client's mistake.
func IsInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// ValidTraceID reports whether id is 32 lowercase hex digits and not all zero.
func ValidTraceID(id string) bool { return validHexID(id, 32) }

// ValidSpanID reports whether id is 16 lowercase hex digits and not all zero.
func ValidSpanID(id string) bool { return validHexID(id, 16) }

func validHexID(id string, n int) bool {
	if len(id) != n {
		return false
	}
	zero := true
	for i := 0; i < n; i++ {
		c := id[i]
		switch {
		case c == '0':
		case c >= '1' && c <= '9', c >= 'a' && c <= 'f':
			zero = false
		default:
			return false
		}
	}
	return !zero
}

// ParseTraceID reads a trace id from a URL: 32 hex digits, either case, not all zero. It returns
// the id in lowercase, as stored, or an input error that says what is wrong with it.
func ParseTraceID(id string) (string, error) {
	lower := normalizeID(id)
	if ValidTraceID(lower) {
		return lower, nil
	}
	return "", inputErrorf("trace id %q %s", id, badID(lower, 32, "trace"))
}

// ParseSpanID reads a span id from a URL as ParseTraceID reads a trace id: 16 hex digits.
func ParseSpanID(id string) (string, error) {
	lower := normalizeID(id)
	if ValidSpanID(lower) {
		return lower, nil
	}
	return "", inputErrorf("span id %q %s", id, badID(lower, 16, "span"))
}

// normalizeID lowercases hex ids, which OTel defines as lowercase but some senders upper-case.
func normalizeID(id string) string {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c >= 'A' && c <= 'F' {
			b := []byte(id)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'F' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return id
}

func hexID(b []byte) string { return hex.EncodeToString(b) }

// cleanSpans makes the text fields of spans storable in place: each U+0000 and invalid UTF-8
// becomes U+FFFD (store.CleanText). The decoders already return spans so cleaned, JSON included;
// this is for spans handed to Ingest by other callers, and costs next to nothing on clean text.
func cleanSpans(spans []store.Span) {
	for i := range spans {
		cleanSpanText(&spans[i])
	}
}

func cleanSpanText(sp *store.Span) {
	sp.Name, sp.StatusMessage = store.CleanText(sp.Name), store.CleanText(sp.StatusMessage)
	sp.Scope, sp.ScopeVersion = store.CleanText(sp.Scope), store.CleanText(sp.ScopeVersion)
}
