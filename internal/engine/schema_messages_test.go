package engine

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSchemaErrorsSayWhatTheValueMustBe: a schema violation reads as what the value must be, in
// the pages' own words (web/static/ui.js), one field each, never the validator's "minLength: got
// 0, want 1".
func TestSchemaErrorsSayWhatTheValueMustBe(t *testing.T) {
	t.Parallel()
	s := MustSchema(`{"type":"object","additionalProperties":false,"required":["city","nights"],
		"properties":{"city":{"type":"string","minLength":1},"code":{"type":"string","maxLength":3,"pattern":"^[A-Z]+$"},
		"nights":{"type":"integer","minimum":1,"maximum":30},"ratio":{"type":"number","exclusiveMinimum":0.5},
		"class":{"enum":["economy","business"]},"tags":{"type":"array","minItems":1,"maxItems":2},"name":{"type":["string","null"]}}}`)
	for _, c := range []struct {
		doc  string
		want []FieldError
	}{
		{`{"city":"","nights":2}`, []FieldError{{Path: "/city", Field: "city", Message: "must not be empty"}}},
		{`{"city":"x"}`, []FieldError{{Path: "/nights", Field: "nights", Message: "is required"}}},
		{`{"city":"x","nights":0}`, []FieldError{{Path: "/nights", Field: "nights", Message: "must be ≥ 1"}}},
		{`{"city":"x","nights":31}`, []FieldError{{Path: "/nights", Field: "nights", Message: "must be ≤ 30"}}},
		{`{"city":"x","nights":"2"}`, []FieldError{{Path: "/nights", Field: "nights", Message: "must be an integer, not a string"}}},
		{`{"city":"x","nights":2,"ratio":0.5}`, []FieldError{{Path: "/ratio", Field: "ratio", Message: "must be > 0.5"}}},
		{`{"city":"x","nights":2,"class":"first"}`, []FieldError{{Path: "/class", Field: "class", Message: `must be one of "economy", "business"`}}},
		{`{"city":"x","nights":2,"code":"ABCD"}`, []FieldError{{Path: "/code", Field: "code", Message: "must have at most 3 characters"}}},
		{`{"city":"x","nights":2,"code":"ab"}`, []FieldError{{Path: "/code", Field: "code", Message: "must match ^[A-Z]+$"}}},
		{`{"city":"x","nights":2,"tags":[]}`, []FieldError{{Path: "/tags", Field: "tags", Message: "needs at least 1 items"}}},
		{`{"city":"x","nights":2,"name":3}`, []FieldError{{Path: "/name", Field: "name", Message: "must be null or a string, not a number"}}},
		{`{"city":"x","nights":2,"extra":1}`, []FieldError{{Path: "/extra", Field: "extra", Message: "is not allowed"}}},
	} {
		var ve *ValidationError
		require.True(t, errors.As(s.ValidateJSON([]byte(c.doc)), &ve), c.doc)
		require.Equal(t, c.want, ve.Fields, c.doc)
	}
}
