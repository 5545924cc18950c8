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
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
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

// sanitizeJSON makes JSON storable and queryable in PostgreSQL, which refuses invalid UTF-8, and
// refuses the escape \u0000 and lone UTF-16 surrogate escapes wherever it turns JSON into text or
// jsonb (->>, jsonb_to_record). Invalid bytes become U+FFFD and those escapes \ufffd, as
// encoding/json does when it decodes them. Valid JSON without them is returned as is.
func sanitizeJSON(raw []byte) []byte {
	if !utf8.Valid(raw) {
		raw = bytes.ToValidUTF8(raw, []byte("\uFFFD"))
	}
	if !bytes.Contains(raw, []byte(`\u`)) {
		return raw
	}
	var out []byte // nil until the first replacement
	done := 0      // raw[:done] is in out
	replace := func(from, to int) {
		out = append(append(out, raw[done:from]...), `\ufffd`...)
		done = to
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // an escaped character, possibly a backslash
			continue
		}
		r, ok := hex4(raw, i+2)
		switch {
		case !ok:
		case r == 0:
			replace(i, i+6)
		case r >= 0xd800 && r < 0xdc00: // a high surrogate needs a low one right after it
			if lo, ok := hex4(raw, i+8); ok && raw[i+6] == '\\' && raw[i+7] == 'u' && lo >= 0xdc00 && lo < 0xe000 {
				i += 6
			} else {
				replace(i, i+6)
			}
		case r >= 0xdc00 && r < 0xe000:
			replace(i, i+6)
		}
		i += 5
	}
	if out == nil {
		return raw
	}
	return append(out, raw[done:]...)
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// sanitizeText makes a string storable as PostgreSQL text, which holds neither NUL nor invalid
// UTF-8: each becomes U+FFFD.
func sanitizeText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// sanitizeSpans makes the text fields of spans storable (see sanitizeText), in place.
func sanitizeSpans(spans []store.Span) {
	for i := range spans {
		sp := &spans[i]
		sp.Name, sp.StatusMessage = sanitizeText(sp.Name), sanitizeText(sp.StatusMessage)
		sp.Scope, sp.ScopeVersion = sanitizeText(sp.Scope), sanitizeText(sp.ScopeVersion)
	}
}

// truncateString cuts s to at most n runes, as Genkit's list does with long attributes.
func truncateString(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	count := 0
	for i := range s {
		if count == n {
			return s[:i], true
		}
		count++
	}
	return s, false
}
