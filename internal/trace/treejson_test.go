package trace_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// reencoded is what encoding/json made of a tree's JSON before Tree.WriteJSON: the same bytes
// compacted, with <, >, &, U+2028 and U+2029 escaped.
func reencoded(t testing.TB, b []byte) []byte {
	var compact, escaped bytes.Buffer
	require.NoError(t, json.Compact(&compact, b))
	json.HTMLEscape(&escaped, compact.Bytes())
	return escaped.Bytes()
}

func treeOf(spans []store.Span) *trace.Tree {
	return &trace.Tree{Trace: &store.Trace{TraceID: spans[0].TraceID, SpanCount: len(spans)},
		Roots: trace.BuildTree(spans), SpanCount: len(spans)}
}

// TestTreeWriteJSONKeepsStoredJSON: attributes, events, links and resource go out byte for byte
// as stored, and the rest is what encoding/json wrote.
func TestTreeWriteJSONKeepsStoredJSON(t *testing.T) {
	t.Parallel()
	attrs := `{ "zeta" : 1,"alpha":[1, 2.50, {"b":true , "a":null}],"html":"<b>&amp;</b>","u":"\u00e9 é"}`
	parent := "00000000000000a1"
	run := uuid.MustParse("0192f0a0-0000-7000-8000-000000000001")
	spans := []store.Span{
		{TraceID: "0123456789abcdef0123456789abcdef", SpanID: parent, Name: "root <flow>", StartTime: 1, EndTime: 9,
			Attributes: json.RawMessage(attrs), Events: json.RawMessage(`[ {"name":"e"} ]`), Links: json.RawMessage(`[]`),
			Resource: json.RawMessage("{\n\"service.name\": \"svc\"\n}"), Source: "otlp", RunID: &run, Scope: "s", ScopeVersion: "1"},
		{TraceID: "0123456789abcdef0123456789abcdef", SpanID: "00000000000000b2", ParentSpanID: &parent, Name: "tool é\u2028",
			StartTime: 2, StatusCode: 2, StatusMessage: "bad \"quote\"", Attributes: json.RawMessage(`{"genkit:state":"interrupted"}`),
			Events: json.RawMessage(`[]`), Links: json.RawMessage(`[]`), Resource: json.RawMessage(`{}`), Source: "genkit"},
	}
	tree := treeOf(spans)
	var buf bytes.Buffer
	require.NoError(t, tree.WriteJSON(&buf))
	require.Contains(t, buf.String(), `"attributes":`+attrs+`,`)
	require.Contains(t, buf.String(), "\"resource\":{\n\"service.name\": \"svc\"\n},")
	want, err := json.Marshal(tree)
	require.NoError(t, err)
	require.Equal(t, string(want), string(reencoded(t, buf.Bytes())))
}

// FuzzTreeWriteJSON: whatever the spans hold, the hand-written tree JSON is valid and is, once
// compacted and HTML-escaped, exactly what encoding/json writes for the same tree.
func FuzzTreeWriteJSON(f *testing.F) {
	f.Add("root", "tool", `{"a": 1}`, `[]`, "", int64(5), int16(0), true)
	f.Add("<&>\u2028", "\xff\x00", `{"genkit:state":"interrupted", "x":"<"}`, `[ {"n":1} ]`, "msg\n", int64(0), int16(2), false)
	f.Fuzz(func(t *testing.T, name1, name2, attrs, events, msg string, end int64, code int16, child bool) {
		if !json.Valid([]byte(attrs)) || !json.Valid([]byte(events)) {
			return
		}
		root := "00000000000000a1"
		spans := []store.Span{
			{TraceID: "0123456789abcdef0123456789abcdef", SpanID: root, Name: name1, StartTime: 1, EndTime: end,
				StatusCode: code, StatusMessage: msg, Attributes: json.RawMessage(attrs), Events: json.RawMessage(events),
				Links: json.RawMessage(`[]`), Resource: json.RawMessage(`{}`), Source: "loupe", Scope: name2},
			{TraceID: "0123456789abcdef0123456789abcdef", SpanID: "00000000000000b2", Name: name2, StartTime: 2,
				Attributes: json.RawMessage(events), Source: "otlp"},
		}
		if child {
			spans[1].ParentSpanID = &root
		}
		tree := treeOf(spans)
		var buf bytes.Buffer
		require.NoError(t, tree.WriteJSON(&buf))
		require.True(t, json.Valid(buf.Bytes()), buf.String())
		want, err := json.Marshal(tree)
		require.NoError(t, err)
		require.Equal(t, string(want), string(reencoded(t, buf.Bytes())))

		tree.Skeleton = true
		buf.Reset()
		require.NoError(t, tree.WriteJSON(&buf))
		require.True(t, json.Valid(buf.Bytes()), buf.String())
		require.NotContains(t, buf.String(), `"attributes"`)

		buf.Reset()
		require.NoError(t, trace.WriteSpanJSON(&buf, tree.Roots[0]))
		require.True(t, json.Valid(buf.Bytes()), buf.String())
	})
}
