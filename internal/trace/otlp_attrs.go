package trace

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// attrsWriter encodes OTLP attribute maps as the JSON objects that spans store, straight from
// pdata: the bytes that store.CleanJSON(json.Marshal(m.AsRaw())) gives, without building the map
// of interfaces, sorting it by reflection and scanning the result again (which was more than half
// of an OTLP body's decoding). Keys are sorted, the last of a repeated key wins, strings are
// escaped as encoding/json escapes them (HTML characters, U+2028 and U+2029 included), invalid
// UTF-8 and U+0000 become U+FFFD as CleanJSON makes them, bytes are base64. Every object of one
// request is written into one growing buffer, of which each is a capped slice.
type attrsWriter struct {
	buf  []byte
	keys []attrKey // scratch, reused across maps of one level
}

type attrKey struct {
	key string
	val pcommon.Value
}

// object encodes m. A map holding a NaN or an infinity, which JSON cannot hold, is encoded as
// attrsJSON always did (an object naming the encoding error).
func (w *attrsWriter) object(m pcommon.Map) json.RawMessage {
	if m.Len() == 0 {
		return json.RawMessage("{}")
	}
	start := len(w.buf)
	out, ok := w.appendMap(w.buf, m)
	if !ok {
		w.buf = w.buf[:start]
		return attrsJSON(m)
	}
	w.buf = out
	return json.RawMessage(out[start:len(out):len(out)])
}

func (w *attrsWriter) appendMap(b []byte, m pcommon.Map) ([]byte, bool) {
	// This level's pairs go on top of the scratch stack; nested maps push theirs above them and
	// pop them again, and level stays readable even when their pushes move the stack.
	base := len(w.keys)
	for k, v := range m.All() {
		w.keys = append(w.keys, attrKey{k, v})
	}
	level := w.keys[base:]
	defer func() { w.keys = w.keys[:base] }()
	slices.SortStableFunc(level, func(a, b attrKey) int { return strings.Compare(a.key, b.key) })
	b = append(b, '{')
	first := true
	for i := range level {
		if i+1 < len(level) && level[i+1].key == level[i].key {
			continue // a later copy of the key wins, as in a Go map
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendStoredJSONString(b, level[i].key)
		b = append(b, ':')
		var ok bool
		if b, ok = w.appendValue(b, level[i].val); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func (w *attrsWriter) appendValue(b []byte, v pcommon.Value) ([]byte, bool) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendStoredJSONString(b, v.Str()), true
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(b, v.Int(), 10), true
	case pcommon.ValueTypeDouble:
		return appendJSONFloat(b, v.Double())
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(b, v.Bool()), true
	case pcommon.ValueTypeMap:
		return w.appendMap(b, v.Map())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		b = append(b, '[')
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = w.appendValue(b, s.At(i)); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case pcommon.ValueTypeBytes:
		raw := v.Bytes().AsRaw()
		if len(raw) == 0 {
			return append(b, "null"...), true // AsRaw gives a nil slice, which encoding/json writes so
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, raw)
		return append(b, '"'), true
	default: // empty
		return append(b, "null"...), true
	}
}

// appendJSONFloat writes f as encoding/json does, and reports false for NaN and infinities.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(b) - start; n >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			b = b[:len(b)-1]
		}
	}
	return b, true
}

// appendStoredJSONString writes s as a JSON string the way encoding/json does (HTML-safe), with U+0000
// as U+FFFD, which PostgreSQL's json cannot hold (as store.CleanJSON does).
func appendStoredJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Runs of plain ASCII, nearly all of an attribute's text, are skipped a table lookup a
		// byte, eight at a time.
		for i+8 <= len(s) && jsonPlain[s[i]] && jsonPlain[s[i+1]] && jsonPlain[s[i+2]] && jsonPlain[s[i+3]] &&
			jsonPlain[s[i+4]] && jsonPlain[s[i+5]] && jsonPlain[s[i+6]] && jsonPlain[s[i+7]] {
			i += 8
		}
		if i >= len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			if jsonPlain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case 0:
				b = append(b, `\ufffd`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonPlain says which bytes a JSON string holds as themselves, as encoding/json writes it: ASCII
// but for controls, the quote, the backslash and the HTML characters.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
