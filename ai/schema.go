package ai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"

	invopop "github.com/invopop/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// schemaCompiles counts schema compilations; tests use it to prove nothing compiles per call.
var schemaCompiles atomic.Int64

// Schema is a JSON schema compiled once, when it is made. Validate never compiles.
type Schema struct {
	raw      json.RawMessage
	doc      any
	compiled *jsonschema.Schema
}

// errNoSchema is NewSchema's answer to nil: no document to compile. (A nil *Schema, which accepts
// everything, is passed through as it is.)
var errNoSchema = errors.New("new schema: no schema document (nil)")

// NewSchema compiles a JSON schema given as JSON bytes, a map, or any JSON-encodable value.
func NewSchema(v any) (*Schema, error) {
	var raw []byte
	switch s := v.(type) {
	case nil:
		return nil, errNoSchema
	case *Schema:
		return s, nil
	case json.RawMessage:
		raw = s
	case []byte:
		raw = s
	case string:
		raw = []byte(s)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("new schema: %w", err)
		}
		raw = b
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("new schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("loupe:schema.json", doc); err != nil {
		return nil, fmt.Errorf("new schema: %w", err)
	}
	schemaCompiles.Add(1)
	compiled, err := c.Compile("loupe:schema.json")
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	return &Schema{raw: bytes.Clone(raw), doc: doc, compiled: compiled}, nil
}

// MustSchema is NewSchema that panics on error; for schemas written in source code.
func MustSchema(v any) *Schema {
	s, err := NewSchema(v)
	if err != nil {
		panic(err)
	}
	return s
}

var (
	reflector            = invopop.Reflector{DoNotReference: true, ExpandedStruct: true}
	referencingReflector = invopop.Reflector{}
)

// SchemaFor derives a schema from the Go type T with invopop/jsonschema and compiles it. For types
// that carry no constraint (interfaces and struct{}) ok is false and the schema nil, which accepts
// everything.
func SchemaFor[T any]() (s *Schema, ok bool, err error) {
	return SchemaForType(reflect.TypeFor[T]())
}

// SchemaForType is SchemaFor for a reflect.Type.
func SchemaForType(t reflect.Type) (s *Schema, ok bool, err error) {
	if t == nil || t.Kind() == reflect.Interface || (t.Kind() == reflect.Struct && t.NumField() == 0) {
		return nil, false, nil
	}
	r := &reflector
	if recursion(t, map[reflect.Type]bool{}) != nil {
		r = &referencingReflector // a type that contains itself is described with $defs and $ref
	}
	js := r.ReflectFromType(t)
	js.Version, js.ID = "", ""
	b, err := json.Marshal(js)
	if err != nil {
		return nil, false, fmt.Errorf("schema for %s: %w", t, err)
	}
	if s, err = NewSchema(b); err != nil {
		return nil, false, err
	}
	return s, true, nil
}

// recursion returns a struct type that t contains within itself, or nil.
func recursion(t reflect.Type, open map[reflect.Type]bool) reflect.Type {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return recursion(t.Elem(), open)
	case reflect.Struct:
		if open[t] {
			return t
		}
		open[t] = true
		defer delete(open, t)
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				if r := recursion(f.Type, open); r != nil {
					return r
				}
			}
		}
	}
	return nil
}

// MarshalJSON returns the schema document as given.
func (s *Schema) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	return s.raw, nil
}

// UnmarshalJSON compiles the schema document.
func (s *Schema) UnmarshalJSON(b []byte) error {
	ns, err := NewSchema(json.RawMessage(b))
	if err != nil {
		return err
	}
	*s = *ns
	return nil
}

// Raw returns the schema document as JSON.
func (s *Schema) Raw() json.RawMessage {
	if s == nil {
		return nil
	}
	return s.raw
}

// FieldError is one schema violation at a JSON pointer location.
type FieldError struct {
	// Path is the JSON pointer of the failing value ("" for the root, "/city", "/items/0").
	Path string `json:"path"`
	// Field is the failing field: the last segment of Path, or the missing property.
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every schema violation of a value. Errors of a generate or a tool wrap it
// with status INVALID_ARGUMENT; get it back with errors.As.
type ValidationError struct {
	Fields []FieldError
}

// Error implements error, naming each failing field.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		name := f.Field
		if name == "" {
			name = "(root)"
		}
		parts[i] = fmt.Sprintf("field %q: %s", name, f.Message)
	}
	return "schema validation failed: " + strings.Join(parts, "; ")
}

// Validate checks a decoded JSON value (maps, slices, strings, float64, bool, nil) or any
// JSON-encodable Go value against the schema. A nil schema accepts everything.
func (s *Schema) Validate(v any) error {
	if s == nil {
		return nil
	}
	g, err := toGeneric(v)
	if err != nil {
		return err
	}
	return s.validateGeneric(g)
}

// ValidateJSON checks raw JSON against the schema.
func (s *Schema) ValidateJSON(data []byte) error {
	if s == nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return &ValidationError{Fields: []FieldError{{Message: "invalid JSON: " + err.Error()}}}
	}
	return s.validateGeneric(v)
}

func (s *Schema) validateGeneric(v any) error {
	err := s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	out := &ValidationError{}
	collectLeaves(ve, out)
	return out
}

func collectLeaves(ve *jsonschema.ValidationError, out *ValidationError) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collectLeaves(c, out)
		}
		return
	}
	path, field := "", ""
	if n := len(ve.InstanceLocation); n > 0 {
		path = "/" + strings.Join(ve.InstanceLocation, "/")
		field = ve.InstanceLocation[n-1]
	}
	msg := friendlyMessage(ve.ErrorKind)
	var members []string // a violation of members the object lacks or must not have is each member's
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		members = k.Missing
	case *kind.AdditionalProperties:
		members = k.Properties
	}
	if members != nil {
		for _, m := range members {
			out.Fields = append(out.Fields, FieldError{Path: path + "/" + m, Field: m, Message: msg})
		}
		return
	}
	out.Fields = append(out.Fields, FieldError{Path: path, Field: field, Message: msg})
}

// toGeneric converts a Go value to the decoded-JSON form the validator expects.
func toGeneric(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, float64, map[string]any, []any, json.Number:
		return v, nil
	case int:
		return float64(x), nil
	case json.RawMessage:
		return jsonschema.UnmarshalJSON(bytes.NewReader(x))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode value: %w", err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}
