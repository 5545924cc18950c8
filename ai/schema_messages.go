package ai

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// friendlyMessage says what a schema violation asks of the value, in the words the pages' own
// check uses (web/static/ui.js validate), so that a person reads the same sentence whether the
// browser or the server refused it: "must not be empty", not the validator's "minLength: got 0,
// want 1". A kind it does not word keeps the validator's message.
func friendlyMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Required:
		return "is required"
	case *kind.AdditionalProperties:
		return "is not allowed"
	case *kind.Type:
		return fmt.Sprintf("must be %s, not %s", strings.Join(withArticles(k.Want), " or "), withArticle(k.Got))
	case *kind.Enum:
		return "must be one of " + joinJSON(k.Want)
	case *kind.Const:
		return "must be " + jsonText(k.Want)
	case *kind.MinLength:
		if k.Want == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("must have at most %d characters", k.Want)
	case *kind.Pattern:
		return "must match " + k.Want
	case *kind.Minimum:
		return "must be ≥ " + ratText(k.Want)
	case *kind.Maximum:
		return "must be ≤ " + ratText(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be > " + ratText(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be < " + ratText(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + ratText(k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("needs at least %d items", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("takes at most %d items", k.Want)
	case *kind.UniqueItems:
		return fmt.Sprintf("must not repeat an item (items %d and %d are equal)", k.Duplicates[0], k.Duplicates[1])
	case *kind.MinProperties:
		return fmt.Sprintf("needs at least %d members", k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("takes at most %d members", k.Want)
	case *kind.AnyOf, *kind.OneOf:
		return "matches none of the allowed shapes"
	case *kind.Format:
		return "must be " + withArticle(k.Want)
	}
	return k.LocalizedString(printer)
}

// withArticle names a JSON type or format for a sentence: "a string", "an integer", "null".
func withArticle(t string) string {
	switch t {
	case "null":
		return "null"
	case "array", "object", "integer", "email", "ipv4", "ipv6", "iri", "idn-email":
		return "an " + t
	}
	return "a " + t
}

func withArticles(ts []string) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = withArticle(t)
	}
	return out
}

func joinJSON(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = jsonText(v)
	}
	return strings.Join(parts, ", ")
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// ratText writes a schema bound as the schema wrote it: 3, 0.5, -2.25.
func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return strings.TrimRight(strings.TrimRight(r.FloatString(12), "0"), ".")
}
