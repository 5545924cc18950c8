package trace

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// TestAttrsWriterMatchesEncodingJSON checks that the direct encoder writes, byte for byte, what
// the reference (encoding/json over the map's AsRaw, then store.CleanJSON) writes.
func TestAttrsWriterMatchesEncodingJSON(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr("genkit:input", `{"q":"<b>&</b>","nl":"a`+"\n\t\r\b\f\x01\x1f\x7f"+`"}`)
	m.PutStr("zero", "a\x00b")
	m.PutStr("bad utf8", "a\xffb\xc3")
	m.PutStr("separators", "a\u2028b\u2029c é 漢字 🙂")
	m.PutStr("", "empty key")
	m.PutInt("int", math.MinInt64)
	m.PutInt("int2", math.MaxInt64)
	for i, f := range []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-7, 1e-6, 123456789, 1e20, 1e21, 1.7976931348623157e308, 5e-324, 0.1, 3.14159e-9} {
		m.PutDouble("f"+string(rune('a'+i)), f)
	}
	m.PutBool("t", true)
	m.PutBool("f", false)
	m.PutEmpty("nothing")
	m.PutEmptyBytes("bytes").FromRaw([]byte{0, 1, 2, 250, 251, 252, 253})
	s := m.PutEmptySlice("list")
	s.AppendEmpty().SetStr("x")
	s.AppendEmpty().SetInt(2)
	s.AppendEmpty().SetEmptyMap().PutStr("k", "v")
	s.AppendEmpty().SetEmptySlice()
	nested := m.PutEmptyMap("nested")
	nested.PutStr("b", "2")
	nested.PutStr("a", "1")
	nested.PutEmptyMap("deeper").PutDouble("x", 2.5)
	var w attrsWriter
	require.Equal(t, string(attrsJSON(m)), string(w.object(m)))

	nan := pcommon.NewMap()
	nan.PutStr("a", "kept")
	nan.PutDouble("bad", math.NaN())
	require.Equal(t, string(attrsJSON(nan)), string(w.object(nan)), "a NaN gives the reference's error object")
	inf := pcommon.NewMap()
	inf.PutEmptySlice("l").AppendEmpty().SetDouble(math.Inf(-1))
	require.Equal(t, string(attrsJSON(inf)), string(w.object(inf)))
	require.Equal(t, "{}", string(w.object(pcommon.NewMap())))

	// Earlier objects stay as written while the buffer grows.
	first := w.object(m)
	for range 100 {
		w.object(m)
	}
	require.Equal(t, string(attrsJSON(m)), string(first))
}

// TestAttrsWriterRepeatedKeyLastWins: OTLP's protobuf can repeat a key, pdata keeps both, and the
// stored object has the last one, as AsRaw's map does.
func TestAttrsWriterRepeatedKeyLastWins(t *testing.T) {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.Attributes().PutStr("dupA", "first")
	sp.Attributes().PutStr("other", "x")
	sp.Attributes().PutStr("dupB", "second")
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	body = bytes.ReplaceAll(body, []byte("dupB"), []byte("dupA"))
	req := ptraceotlp.NewExportRequest()
	require.NoError(t, req.UnmarshalProto(body))
	attrs := req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
	require.Equal(t, 3, attrs.Len(), "pdata keeps the repeat")
	var w attrsWriter
	require.Equal(t, `{"dupA":"second","other":"x"}`, string(w.object(attrs)))
	require.Equal(t, string(attrsJSON(attrs)), string(w.object(attrs)))
}

// FuzzAttrsWriter builds attribute maps from the fuzzer's bytes and compares the direct encoder
// with the reference.
func FuzzAttrsWriter(f *testing.F) {
	f.Add([]byte("\x01key\x00value<&>\x02n\x00\x00\x00\x00\x00\x00\x00\x07"))
	f.Add([]byte("\x03f\x00\x00\x00\x00\x00\x00\x00\xf0\x7f\x05m\x00\x01a\x00\xff\xfe"))
	f.Add([]byte("\x01\xe2\x80\xa8\x00\xed\xa0\x80\x04b\x00\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := pcommon.NewMap()
		fillMap(m, &data, 0)
		var w attrsWriter
		require.Equal(t, string(attrsJSON(m)), string(w.object(m)))
	})
}

// fillMap reads entries from data: a type byte, a key up to a NUL byte, and a value.
func fillMap(m pcommon.Map, data *[]byte, depth int) {
	for len(*data) > 0 {
		typ := (*data)[0] % 8
		*data = (*data)[1:]
		if typ == 7 {
			return // end of this map
		}
		key := readString(data)
		fillValue(m.PutEmpty(key), typ, data, depth)
	}
}

func fillValue(v pcommon.Value, typ byte, data *[]byte, depth int) {
	switch typ {
	case 0:
		v.SetStr(readString(data))
	case 1, 2:
		if typ == 1 {
			v.SetStr(readString(data))
			return
		}
		v.SetInt(int64(binary.LittleEndian.Uint64(read8(data))))
	case 3:
		v.SetDouble(math.Float64frombits(binary.LittleEndian.Uint64(read8(data))))
	case 4:
		v.SetBool(len(*data) > 0 && (*data)[0]&1 == 1)
		if len(*data) > 0 {
			*data = (*data)[1:]
		}
	case 5:
		if depth < 4 {
			fillMap(v.SetEmptyMap(), data, depth+1)
		}
	case 6:
		if depth < 4 {
			s := v.SetEmptySlice()
			for len(*data) > 0 && (*data)[0]%8 != 7 {
				t := (*data)[0] % 8
				*data = (*data)[1:]
				fillValue(s.AppendEmpty(), t, data, depth+1)
			}
			if len(*data) > 0 {
				*data = (*data)[1:]
			}
		} else {
			v.SetEmptyBytes().FromRaw([]byte(readString(data)))
		}
	}
}

func readString(data *[]byte) string {
	for i, c := range *data {
		if c == 0 {
			s := string((*data)[:i])
			*data = (*data)[i+1:]
			return s
		}
	}
	s := string(*data)
	*data = nil
	return s
}

func read8(data *[]byte) []byte {
	var b [8]byte
	n := copy(b[:], *data)
	*data = (*data)[n:]
	return b[:]
}

// TestRawTextReadsPlainStringsAsJSONDoes: the shortcut for strings with nothing escaped gives
// what decoding gives, and leaves everything else to the decoder.
func TestRawTextReadsPlainStringsAsJSONDoes(t *testing.T) {
	for _, raw := range []string{`"plain"`, `""`, `"é 漢字"`, `"a\"b"`, `"a\\b"`, `"\u00e9"`, "\"a\x01b\"", "\"\xff\"", `"`, `12`, `{"a":1}`, `null`, `true`} {
		got := rawText(json.RawMessage(raw))
		var want *string
		if raw != "null" {
			var s string
			if raw[0] == '"' {
				if json.Unmarshal([]byte(raw), &s) == nil {
					want = &s
				}
			} else {
				want = &raw
			}
		}
		require.Equal(t, want, got, raw)
	}
}
