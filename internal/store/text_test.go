package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// unstorable are JSON documents that PostgreSQL refuses in jsonb (or, for json, as soon as a
// query turns a value into text), each with the path and problem CheckJSON reports.
var unstorable = []struct {
	doc, field, problem string
}{
	{`{"destination":"a\u0000b"}`, "input/destination", "contains U+0000"},
	{`{"a":["ok","\ud800x"]}`, "input/a/1", `contains a lone UTF-16 surrogate (\ud800)`},
	{`{"a":"\udc00"}`, "input/a", `contains a lone UTF-16 surrogate (\udc00)`},
	{`{"a":"\ud800\u0041"}`, "input/a", `contains a lone UTF-16 surrogate (\ud800)`},
	{"{\"a\":{\"b\":\"x\xffy\"}}", "input/a/b", "contains invalid UTF-8 (byte 0xff)"},
	{`{"ok":1,"a\u0000b":2}`, "input", "has a member name that contains U+0000"},
	{`{"a/b~c":[{"x":1},{"y":"\u0000"}]}`, "input/a~1b~0c/1/y", "contains U+0000"},
	{`"\u0000"`, "input", "contains U+0000"},
	{`[[],[1,2,{"k":[null,"\uDBFF"]}]]`, "input/1/2/k/1", `contains a lone UTF-16 surrogate (\udbff)`},
	{`{"big":1e400,"s":"\u0000"}`, "input/s", "contains U+0000"},
	{`{"n":[1,1e131072]}`, "input/n/1", "holds a number beyond the range of numeric (1e131072)"},
	{`{"n":99999e131068}`, "input/n", "holds a number beyond the range of numeric (99999e131068)"},
	{`{"n":-1.5e-16383}`, "input/n", "holds a number beyond the range of numeric (-1.5e-16383)"},
	{`{"n":0e-16384,"s":"\u0000"}`, "input/n", "holds a number beyond the range of numeric (0e-16384)"},
	{`[0E+1073741823]`, "input/0", "holds a number beyond the range of numeric (0E+1073741823)"},
	{`{"n":1` + strings.Repeat("0", 131072) + `}`, "input/n", "holds a number beyond the range of numeric (1" + strings.Repeat("0", 23) + "…)"},
	{`{"n":0.` + strings.Repeat("1", 16384) + `}`, "input/n", "holds a number beyond the range of numeric (0." + strings.Repeat("1", 22) + "…)"},
}

// storableNumbers are at the edges of numeric's range, inside it.
var storableNumbers = []string{`1e131071`, `-1.5e131071`, `0e131072`, `0.0e999999`, `12e-16383`, `1e-16383`, `0e-16383`,
	`{"s":"1e999999","n":[1,2.5e10,-3E-7]}`, `9` + strings.Repeat("9", 131071), `0.` + strings.Repeat("1", 16383)}

func TestCheckJSONNamesTheFirstStringPostgreSQLRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range unstorable {
		err := store.CheckJSON("input", json.RawMessage(c.doc))
		var te *store.TextError
		require.True(t, errors.As(err, &te), "CheckJSON(%s) = %v", c.doc, err)
		require.Equal(t, c.field, te.Field, c.doc)
		require.Equal(t, c.problem, te.Problem, c.doc)
		require.Equal(t, c.field+" "+c.problem+", which PostgreSQL cannot store", te.Error())
	}
	require.EqualError(t, store.CheckJSON("", json.RawMessage(`{"input":{"destination":"a\u0000b"}}`)),
		"input/destination contains U+0000, which PostgreSQL cannot store", "a request body's members name themselves")
	require.EqualError(t, store.CheckJSON("", json.RawMessage(`"\u0000"`)), "the value contains U+0000, which PostgreSQL cannot store")

	for _, ok := range append([]string{`{"a":"plain"}`, `{"a":"\\u0000"}`, `{"a":"\ud83d\ude00 \u00e9 \u003c"}`, `null`, `[1,2,3]`, ``}, storableNumbers...) {
		require.NoError(t, store.CheckJSON("input", json.RawMessage(ok)), ok)
	}
}

func TestCheckJSONQuotesAFieldThatDoesNotPrint(t *testing.T) {
	t.Parallel()
	err := store.CheckJSON("", json.RawMessage(`{"a\nb":"\u0000"}`))
	require.EqualError(t, err, `"a\nb" contains U+0000, which PostgreSQL cannot store`)
	err = &store.TextError{Field: "q\xff", Problem: "contains U+0000"}
	require.EqualError(t, err, `"q\xff" contains U+0000, which PostgreSQL cannot store`)
}

func TestCheckTextFindsNULAndInvalidUTF8(t *testing.T) {
	t.Parallel()
	require.NoError(t, store.CheckText("q", "plain é ☃"))
	require.EqualError(t, store.CheckText("q", "a\x00b"), "q contains U+0000, which PostgreSQL cannot store")
	require.EqualError(t, store.CheckText("q", "a\xffb\x00"), "q contains invalid UTF-8 (byte 0xff), which PostgreSQL cannot store")
	require.EqualError(t, store.CheckText("q", "\xed\xa0\x80"), "q contains invalid UTF-8 (byte 0xed), which PostgreSQL cannot store",
		"a surrogate encoded as UTF-8 is not UTF-8")
}

func TestCleanJSONReplacesWhatPostgreSQLRefuses(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a":"x\u0000y"}`:             `{"a":"x\ufffdy"}`,
		`{"a":"\ud800x"}`:              `{"a":"\ufffdx"}`,      // lone high surrogate
		`{"a":"\udc00"}`:               `{"a":"\ufffd"}`,       // lone low surrogate
		`{"a":"\ud800\u0041"}`:         `{"a":"\ufffd\u0041"}`, // high surrogate, then no low one
		`{"a":"\ud800\ud800\udc00"}`:   `{"a":"\ufffd\ud800\udc00"}`,
		`{"a":"\ud83d\ude00"}`:         `{"a":"\ud83d\ude00"}`, // a valid pair stays
		`{"a":"\\u0000"}`:              `{"a":"\\u0000"}`,      // an escaped backslash, then text
		`{"a":"\\\u0000","\u00e9":1}`:  `{"a":"\\\ufffd","\u00e9":1}`,
		`{"\u0000":"\uD800","b":"ok"}`: `{"\ufffd":"\ufffd","b":"ok"}`,
		"{\"a\":\"x\xffy\"}":           "{\"a\":\"x\uFFFDy\"}", // invalid UTF-8
		"{\"a\":\"\xed\xa0\x80\"}":     "{\"a\":\"\uFFFD\uFFFD\uFFFD\"}",
		"{\"a\":\"\xff\\u0000\"}":      "{\"a\":\"\uFFFD\\ufffd\"}",
		`{"a":[1e131072,2,-0e-16384]}`: `{"a":["1e131072",2,"-0e-16384"]}`, // numbers numeric cannot hold
		`{"a":"\u0000","b":1e131072}`:  `{"a":"\ufffd","b":"1e131072"}`,
	} {
		got := store.CleanJSON(json.RawMessage(in))
		require.Equal(t, want, string(got), "CleanJSON(%s)", in)
		require.True(t, json.Valid(got), string(got))
		require.NoError(t, store.CheckJSON("", got))
	}
}

// Not parallel: testing.AllocsPerRun counts every goroutine's allocations.
func TestCleanJSONReturnsAStorableDocumentItselfWithoutAllocating(t *testing.T) {
	for _, doc := range []string{`{"a":"plain","b":[1,2.5,true,null]}`, `{"html":"\u003cb\u003e","pair":"\ud83d\ude00","text":"\\u0000"}`} {
		in := json.RawMessage(doc)
		out := store.CleanJSON(in)
		require.Equal(t, doc, string(out))
		require.Same(t, &in[0], &out[0], "the same bytes, not a copy")
		require.Zero(t, testing.AllocsPerRun(100, func() { store.CleanJSON(in) }))
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = store.CheckJSON("input", in) }))
	}
}

func TestCleanTextReplacesNULAndInvalidUTF8(t *testing.T) {
	t.Parallel()
	require.Equal(t, "plain é", store.CleanText("plain é"))
	require.Equal(t, "a\uFFFDb", store.CleanText("a\x00b"))
	require.Equal(t, "a\uFFFDb", store.CleanText("a\xffb"))
}

// TestPostgreSQLStoresWhatCleanJSONMakes proves both halves against a real server: each document
// CheckJSON refuses is one that PostgreSQL refuses too, and CleanJSON's output of it is stored;
// the same for text and CleanText.
func TestPostgreSQLStoresWhatCleanJSONMakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	for _, c := range unstorable {
		var back string
		require.Error(t, pool.QueryRow(ctx, `SELECT $1::text::jsonb::text`, c.doc).Scan(&back), "PostgreSQL stores %q, so CheckJSON need not refuse it", c.doc)
		clean := store.CleanJSON(json.RawMessage(c.doc))
		require.NoError(t, pool.QueryRow(ctx, `SELECT $1::text::jsonb::text`, string(clean)).Scan(&back), "cleaned %q", clean)
		require.True(t, utf8.ValidString(back))
	}
	for _, ok := range storableNumbers {
		var back string
		require.NoError(t, pool.QueryRow(ctx, `SELECT $1::text::jsonb::text`, ok).Scan(&back), "PostgreSQL refuses %.40s, which CheckJSON lets through", ok)
	}
	for _, bad := range []string{"a\x00b", "a\xffb", "\xed\xa0\x80"} {
		var back string
		require.Error(t, pool.QueryRow(ctx, `SELECT $1::text`, bad).Scan(&back), "PostgreSQL refuses %q as text", bad)
		require.NoError(t, pool.QueryRow(ctx, `SELECT $1::text`, store.CleanText(bad)).Scan(&back))
		require.Equal(t, store.CleanText(bad), back)
	}
}

// FuzzCleanJSON checks CleanJSON and CheckJSON against each other on any bytes: what CleanJSON
// returns, CheckJSON accepts, and it is valid JSON when the input was; CleanJSON changes a
// document exactly when CheckJSON refuses it; CheckJSON names its field within the document.
func FuzzCleanJSON(f *testing.F) {
	for _, c := range unstorable {
		f.Add([]byte(c.doc))
	}
	for _, seed := range []string{`{"a":"\\u0000"}`, `{"a":"\ud83d\ude00"}`, `\u`, `"\ud800\`, `"\\\\\u0000"`, "\"\xe2\x82\"", `{"a":[{"b":"\u0000"}]}`} {
		f.Add([]byte(seed))
	}
	addFixtures(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		out := store.CleanJSON(in)
		require.Equal(t, orig, in, "CleanJSON never writes to its input")
		require.NoError(t, store.CheckJSON("", out), "CleanJSON(%q) = %q", in, out)
		checkErr := store.CheckJSON("doc", in)
		if checkErr == nil {
			require.Equal(t, in, []byte(out), "a storable document is returned as it is")
		} else {
			require.NotEqual(t, in, []byte(out), "CheckJSON refused %q (%v), so CleanJSON must change it", in, checkErr)
			var te *store.TextError
			require.ErrorAs(t, checkErr, &te)
			require.True(t, te.Field == "doc" || strings.HasPrefix(te.Field, "doc/"), te.Field)
			require.NoError(t, store.CheckText("message", te.Error()), "the message is safe to log")
		}
		if json.Valid(in) {
			require.True(t, json.Valid(out), "CleanJSON(%q) = %q is not valid JSON", in, out)
			var a, b any
			if decodeNumbers(in, &a) == nil {
				require.NoError(t, decodeNumbers(out, &b))
				if want, ok := cleaned(a); ok {
					require.Equal(t, want, b, "CleanJSON replaces U+0000 and only what encoding/json decodes as U+FFFD")
				}
			}
		}
	})
}

// FuzzCleanText checks that CleanText's output passes CheckText, and that CleanText changes a
// string exactly when CheckText refuses it.
func FuzzCleanText(f *testing.F) {
	for _, s := range []string{"plain", "a\x00b", "a\xffb", "\xed\xa0\x80", "é\x00\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := store.CleanText(s)
		require.NoError(t, store.CheckText("s", out))
		require.Equal(t, store.CheckText("s", s) == nil, out == s)
	})
}

// addFixtures seeds a fuzz target with the real payloads kept in ../trace/testdata (see its
// fixtures/README.md): whole bodies, and each span's attributes on their own.
func addFixtures(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "trace", "testdata", "genkit-go-1.4.0", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(b)
	}
	files, _ = filepath.Glob(filepath.Join("..", "trace", "testdata", "fixtures", "*.jsonl"))
	require.NotEmpty(f, files)
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		for line := range bytes.Lines(b) {
			var req struct{ Body string }
			require.NoError(f, json.Unmarshal(line, &req))
			f.Add([]byte(req.Body))
		}
	}
}

// decodeNumbers decodes a JSON document keeping its numbers as written.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// cleaned is a decoded JSON value with U+0000 replaced in every string and each number numeric
// cannot hold turned into a string, as CleanJSON does; ok is false when that makes two member
// names of one object the same.
func cleaned(v any) (out any, ok bool) {
	switch x := v.(type) {
	case string:
		return store.CleanText(x), true
	case json.Number:
		if store.CheckJSON("", json.RawMessage(x)) != nil {
			return string(x), true
		}
	case []any:
		for i := range x {
			if x[i], ok = cleaned(x[i]); !ok {
				return nil, false
			}
		}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			k = store.CleanText(k)
			if _, dup := m[k]; dup {
				return nil, false
			}
			if m[k], ok = cleaned(e); !ok {
				return nil, false
			}
		}
		return m, true
	}
	return v, true
}

// TestTruncateRunesCutsWholeRunes: a cut never splits a rune, and says whether it cut.
func TestTruncateRunesCutsWholeRunes(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
		cut  bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"日本語", 3, "日本語", false},
		{"日本語です", 3, "日本語", true},
		{"", 0, "", false},
		{"a", 0, "", true},
	} {
		got, cut := store.TruncateRunes(c.in, c.n)
		require.Equal(t, c.want, got, c.in)
		require.Equal(t, c.cut, cut, c.in)
	}
}

// TestContainsWordAsBytesContains: the same answer as bytes.Contains, the word at the start, the
// end, overlapping near-misses, and words without letters.
func TestContainsWordAsBytesContains(t *testing.T) {
	t.Parallel()
	texts := []string{"", "interrupt", "xinterrupted", "interrup", "nterrupt", "an interruption", "ppp interrupppt interrupt",
		`{"genkit:state":"interrupted"}`, `"resume"`, "resum", "resumé", "12:34", "pppppppp"}
	words := []string{"interrupt", "interrupted", "resume", `"resume"`, ":", "34", "p", "ession"}
	for _, text := range texts {
		for _, word := range words {
			require.Equal(t, bytes.Contains([]byte(text), []byte(word)), store.ContainsWord([]byte(text), word), "%q in %q", word, text)
		}
	}
}
