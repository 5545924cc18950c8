package runs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// maxChanges bounds the changes listed for one part of a diff, so that two unrelated runs do not
// make a diff of megabytes; Truncated says when the bound was hit.
const maxChanges = 200

// Change is one difference between two JSON values, RFC 6902 style: the operation that turns A's
// value at Path (a JSON pointer) into B's.
type Change struct {
	Op   string `json:"op"` // add, remove or replace
	Path string `json:"path"`
	A    any    `json:"a"`
	B    any    `json:"b"`
}

// Changes is the list of differences of one part; empty means equal.
type Changes []Change

// MarshalJSON writes an empty list as [] rather than null, for the UI's sake.
func (c Changes) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]Change(c))
}

// missing stands for a value that one side does not have at all (as opposed to JSON null).
type missing struct{}

// diffRaw compares two JSON documents; an empty one is missing.
func diffRaw(a, b json.RawMessage, trunc *bool) Changes {
	return appendChanges(nil, "", a, b, trunc)
}

func appendChanges(out Changes, prefix string, a, b json.RawMessage, trunc *bool) Changes {
	if bytes.Equal(a, b) {
		return out
	}
	va, vb := decodeOrMissing(a), decodeOrMissing(b)
	diffValue(prefix, va, vb, &out, trunc)
	return out
}

func decodeOrMissing(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 {
		return missing{}
	}
	v, err := decode(raw)
	if err != nil {
		return string(raw)
	}
	return v
}

// decode reads JSON keeping numbers exact.
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode JSON: %w", err)
	}
	return v, nil
}

// diffJSON lists the differences between two JSON documents.
func diffJSON(a, b []byte) Changes {
	var trunc bool
	return diffRaw(a, b, &trunc)
}

// diffValue appends the changes that turn a into b, recursing into objects (keys in order) and
// arrays (by index).
func diffValue(path string, a, b any, out *Changes, trunc *bool) {
	if len(*out) >= maxChanges {
		*trunc = true
		return
	}
	_, aMissing := a.(missing)
	_, bMissing := b.(missing)
	switch {
	case aMissing && bMissing:
		return
	case aMissing:
		*out = append(*out, Change{Op: "add", Path: path, B: b})
		return
	case bMissing:
		*out = append(*out, Change{Op: "remove", Path: path, A: a})
		return
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			va, ok := x[k]
			if !ok {
				va = missing{}
			}
			vb, ok := y[k]
			if !ok {
				vb = missing{}
			}
			diffValue(path+"/"+escapePointer(k), va, vb, out, trunc)
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		for i := range max(len(x), len(y)) {
			var va, vb any = missing{}, missing{}
			if i < len(x) {
				va = x[i]
			}
			if i < len(y) {
				vb = y[i]
			}
			diffValue(path+"/"+strconv.Itoa(i), va, vb, out, trunc)
		}
		return
	case json.Number:
		if y, ok := b.(json.Number); ok && numbersEqual(x, y) {
			return
		}
	default:
		if a == b {
			return
		}
	}
	*out = append(*out, Change{Op: "replace", Path: path, A: a, B: b})
}

func numbersEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	fa, okA := new(big.Float).SetString(string(a))
	fb, okB := new(big.Float).SetString(string(b))
	return okA && okB && fa.Cmp(fb) == 0
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}
