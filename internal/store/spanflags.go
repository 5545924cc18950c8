package store

import (
	"bytes"
	"encoding/json"
)

// Span flags, the spans.flags column: facts about a span that live in its JSON, worked out once
// when the span is written, so that its trace's summary can count them (Trace.Interrupted) and a
// merge that replaces the span can take its old copy's share back without parsing it.
const (
	// spanFlagInterrupted: the span's genkit:state is "interrupted".
	spanFlagInterrupted int16 = 1 << iota
	// spanFlagResumes: one of the span's links has loupe.link.type "resume": it goes on, in its
	// own trace, from an interrupted turn.
	spanFlagResumes
)

// spanFlags works out sp's flags. Both checks look for their words first, so a span without them
// (nearly every span) costs two byte searches. Migration 00059 set the flags of the spans stored
// before it with the same conditions in SQL.
func spanFlags(sp *Span) int16 {
	var f int16
	if attrInterrupted(sp.Attributes) {
		f |= spanFlagInterrupted
	}
	if linksResume(sp.Links) {
		f |= spanFlagResumes
	}
	return f
}

// spanFlagsOf works out the flags of each span.
func spanFlagsOf(spans []Span) []int16 {
	flags := make([]int16, len(spans))
	for i := range spans {
		flags[i] = spanFlags(&spans[i])
	}
	return flags
}

// attrInterrupted reports whether attrs, a JSON object, has genkit:state "interrupted". Like
// PostgreSQL's ->> on json, the last of repeated keys counts.
func attrInterrupted(attrs []byte) bool {
	if !ContainsWord(attrs, "interrupted") {
		return false
	}
	var state json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(attrs))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return false
		}
		if key == "genkit:state" {
			state = v
		}
	}
	var s string
	return state != nil && json.Unmarshal(state, &s) == nil && s == "interrupted"
}

// linksResume reports whether links, a JSON array of links, holds one whose attributes have
// loupe.link.type "resume".
func linksResume(links []byte) bool {
	if !ContainsWord(links, `"resume"`) || !ContainsWord(links, `"loupe.link.type"`) {
		return false
	}
	var all []json.RawMessage
	if json.Unmarshal(links, &all) != nil {
		return false
	}
	for _, l := range all {
		// Maps, not a struct: keys match exactly, as in SQL, where encoding/json's struct fields
		// would match any case.
		var link, attrs map[string]json.RawMessage
		if json.Unmarshal(l, &link) != nil || json.Unmarshal(link["attributes"], &attrs) != nil {
			continue
		}
		var s string
		if json.Unmarshal(attrs["loupe.link.type"], &s) == nil && s == "resume" {
			return true
		}
	}
	return false
}
