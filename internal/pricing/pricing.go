// Package pricing prices a run's model calls: a table of USD per million input and output
// tokens per model, built in for common OpenAI, Anthropic and Gemini models and overridden by a
// prices file (serve --prices). A model the table does not know has no price, and a cost that
// needs it is unknown: Loupe shows no cost rather than a wrong one.
package pricing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Price is a model's list price in USD per million tokens.
type Price struct {
	Input  float64 `yaml:"input" json:"input"`
	Output float64 `yaml:"output" json:"output"`
}

// Tokens are the input and output tokens spent on one model.
type Tokens struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

// Entry is one row of a table: a model key and its price. A key matches a model name as Match
// says.
type Entry struct {
	Key   string
	Price Price
}

// Table is a price table; the zero Table knows no model. It is read-only once built, and safe
// for concurrent use.
type Table struct {
	entries map[string]Price
	keys    []string // longest first: the first key that matches is the most specific
}

// BuiltinDate is when the built-in prices were copied from the providers' price lists.
const BuiltinDate = "2025-10"

// builtin are approximate list prices (USD per million tokens, standard tier, no caching or batch
// discount, the lowest tier of tiered prices) as published by OpenAI, Anthropic and Google in
// October 2025 (BuiltinDate). A dated or versioned name (gpt-4o-2024-08-06,
// claude-sonnet-4-5-20250929, gemini-2.0-flash-001, claude-sonnet-4@20250514) takes its model's
// price; a preview or any other variant is not priced.
var builtin = map[string]Price{
	// OpenAI
	"gpt-5":         {1.25, 10},
	"gpt-5-mini":    {0.25, 2},
	"gpt-5-nano":    {0.05, 0.40},
	"gpt-4.1":       {2, 8},
	"gpt-4.1-mini":  {0.40, 1.60},
	"gpt-4.1-nano":  {0.10, 0.40},
	"gpt-4o":        {2.50, 10},
	"gpt-4o-mini":   {0.15, 0.60},
	"gpt-4-turbo":   {10, 30},
	"gpt-3.5-turbo": {0.50, 1.50},
	"o1":            {15, 60},
	"o3":            {2, 8},
	"o3-mini":       {1.10, 4.40},
	"o4-mini":       {1.10, 4.40},
	// Anthropic
	"claude-opus-4-5":   {5, 25},
	"claude-opus-4-1":   {15, 75},
	"claude-opus-4":     {15, 75},
	"claude-sonnet-4-5": {3, 15},
	"claude-sonnet-4":   {3, 15},
	"claude-haiku-4-5":  {1, 5},
	"claude-3-7-sonnet": {3, 15},
	"claude-3-5-sonnet": {3, 15},
	"claude-3-5-haiku":  {0.80, 4},
	"claude-3-opus":     {15, 75},
	"claude-3-haiku":    {0.25, 1.25},
	// Google Gemini
	"gemini-2.5-pro":        {1.25, 10},
	"gemini-2.5-flash":      {0.30, 2.50},
	"gemini-2.5-flash-lite": {0.10, 0.40},
	"gemini-2.0-flash":      {0.10, 0.40},
	"gemini-2.0-flash-lite": {0.075, 0.30},
	"gemini-1.5-pro":        {1.25, 5},
	"gemini-1.5-flash":      {0.075, 0.30},
}

// Builtin returns the built-in table.
func Builtin() *Table {
	t, _ := newTable(builtin)
	return t
}

func newTable(m map[string]Price) (*Table, error) {
	t := &Table{entries: make(map[string]Price, len(m))}
	for k, p := range m {
		key := strings.ToLower(strings.TrimSpace(k))
		if key == "" || key == "*" {
			return nil, fmt.Errorf("model %q: a key names a model or, ending in *, a prefix of one", k)
		}
		if p.Input < 0 || p.Output < 0 || math.IsNaN(p.Input) || math.IsNaN(p.Output) || math.IsInf(p.Input, 0) || math.IsInf(p.Output, 0) {
			return nil, fmt.Errorf("model %q: prices are USD per million tokens, zero or more", k)
		}
		t.entries[key] = p
	}
	for k := range t.entries {
		t.keys = append(t.keys, k)
	}
	sort.Slice(t.keys, func(i, j int) bool { return keyLess(t.keys[i], t.keys[j]) })
	return t, nil
}

// keyLess orders keys as lookups try them: the longest stem first, and of one stem the exact key
// before the prefix (gpt-4o before gpt-4o*).
func keyLess(a, b string) bool {
	sa, sb := strings.TrimSuffix(a, "*"), strings.TrimSuffix(b, "*")
	if len(sa) != len(sb) {
		return len(sa) > len(sb)
	}
	if pa, pb := strings.HasSuffix(a, "*"), strings.HasSuffix(b, "*"); pa != pb {
		return pb
	}
	return a < b
}

// file is a prices file: models and their prices, and whether the built-in table stays under
// them.
type file struct {
	Models  map[string]Price `yaml:"models"`
	Builtin *bool            `yaml:"builtin"`
}

// Load reads a prices file (YAML, or JSON, which is YAML too):
//
//	builtin: true            # keep the built-in prices under these (the default)
//	models:
//	  gpt-4o: {input: 2.5, output: 10}
//	  my-finetune*: {input: 0.3, output: 1.2}
//
// Its entries replace the built-in ones of the same key.
func Load(path string) (*Table, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse reads a prices file's content (see Load).
func Parse(src []byte) (*Table, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return nil, fmt.Errorf("read prices: %w", err)
	}
	m := map[string]Price{}
	if f.Builtin == nil || *f.Builtin {
		for k, p := range builtin {
			m[k] = p
		}
	}
	for k, p := range f.Models {
		m[strings.ToLower(strings.TrimSpace(k))] = p
	}
	t, err := newTable(m)
	if err != nil {
		return nil, fmt.Errorf("read prices: %w", err)
	}
	return t, nil
}

// VersionSuffixPattern is what may follow a model's key in a name that takes its price: a date or
// a version number (-2024-08-06, -20250929, -001), -latest, or Vertex AI's @version. The store's
// SQL that prices runs in a sort matches names with it too.
const VersionSuffixPattern = `^(-[0-9][0-9-]*|-latest|@.*)$`

var versionSuffix = regexp.MustCompile(VersionSuffixPattern)

// names are the names a model is looked up by, in order: its name in lower case, then, when it has
// a provider's prefix ("openai/gpt-4o", "googleai/gemini-2.5-flash"), the name without it. A key
// may name a model with its prefix (demo/travel) or without (gpt-4o).
func names(model string) []string {
	model = strings.ToLower(model)
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		return []string{model, model[i+1:]}
	}
	return []string{model}
}

// Match reports whether a key matches a model name in lower case: the same name; the key, then a
// date or version (see versionSuffix); or, for a key ending in *, any name it starts.
func Match(key, name string) bool {
	if stem, ok := strings.CutSuffix(key, "*"); ok {
		return strings.HasPrefix(name, stem)
	}
	if name == key {
		return true
	}
	rest, ok := strings.CutPrefix(name, key)
	return ok && versionSuffix.MatchString(rest)
}

// Lookup returns a model's price: of the keys that match its name (then its name without a
// provider's prefix), the most specific.
func (t *Table) Lookup(model string) (Price, bool) {
	if t == nil {
		return Price{}, false
	}
	for _, name := range names(model) {
		if p, ok := t.entries[name]; ok {
			return p, true
		}
		for _, k := range t.keys {
			if Match(k, name) {
				return t.entries[k], true
			}
		}
	}
	return Price{}, false
}

// Cost prices tokens spent per model, in USD. It is unknown (false) when a model called has no
// price, even with no tokens reported (a model that reports none is not known to be free): a part
// of the cost would be missing. No model calls cost 0.
func (t *Table) Cost(usage map[string]Tokens) (float64, bool) {
	var usd float64
	for model, n := range usage {
		p, ok := t.Lookup(model)
		if !ok {
			return 0, false
		}
		usd += (float64(n.Input)*p.Input + float64(n.Output)*p.Output) / 1e6
	}
	return usd, true
}

// Entries returns the table's entries, most specific key first: what the store's SQL prices a
// sort by.
func (t *Table) Entries() []Entry {
	if t == nil {
		return nil
	}
	out := make([]Entry, len(t.keys))
	for i, k := range t.keys {
		out[i] = Entry{Key: k, Price: t.entries[k]}
	}
	return out
}
