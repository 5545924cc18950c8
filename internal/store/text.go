package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PostgreSQL refuses four things that Go strings and JSON documents may hold: U+0000 (in text,
// and as the escape \u0000 in jsonb), UTF-16 surrogate escapes that are not a high one followed by
// a low one (\ud800 alone; jsonb decodes every escape), bytes that are not UTF-8, and, in jsonb,
// numbers beyond the range of numeric (1e131072, 1e-16384), which JSON allows and encoding/json
// decodes. A value holding one fails the whole statement, and with it the transaction. Two ways
// out:
//
//   - CheckText and CheckJSON find the first such thing in what a client sent, so that the server
//     refuses it with a message naming the field;
//   - CleanText and CleanJSON replace each with U+FFFD, for data that is recorded rather than
//     asked for (model and tool output, spans from other programs), which must never be lost
//     for one bad character.

// TextError says where a value holds something PostgreSQL cannot store, and what.
type TextError struct {
	// Field is the value's name: a query parameter or form field, or a JSON path whose segments
	// are separated by slashes, as in details.field of a schema error ("input/destination",
	// "edits/0/message"). It is "" for a whole document.
	Field string
	// Problem completes the sentence "<field> ...": "contains U+0000", "contains a lone UTF-16
	// surrogate (\ud800)", "contains invalid UTF-8 (byte 0xff)", "holds a number beyond the range
	// of numeric (1e131072)", or, for a JSON object whose member's name holds it, "has a member
	// name that contains U+0000".
	Problem string
}

func (e *TextError) Error() string {
	return displayField(e.Field) + " " + e.Problem + ", which PostgreSQL cannot store"
}

// displayField shows a field name as it is when every character of it prints, and quoted
// otherwise, so that no control character or invalid byte of a client's reaches a log line.
func displayField(f string) string {
	if f == "" {
		return "the value"
	}
	for _, r := range f {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(f)
		}
	}
	return f
}

// CheckText reports the first U+0000 or invalid UTF-8 in s as a *TextError for field, or nil.
func CheckText(field, s string) error {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return nil
	}
	_, problem := textProblem([]byte(s))
	return &TextError{Field: field, Problem: problem}
}

// textProblem returns the offset of the first U+0000 or invalid UTF-8 sequence in b, and what it
// is; the offset is -1 when there is none.
func textProblem(b []byte) (at int, problem string) {
	nul := bytes.IndexByte(b, 0)
	if utf8.Valid(b) {
		if nul >= 0 {
			return nul, "contains U+0000"
		}
		return -1, ""
	}
	for i := 0; i < len(b); {
		if b[i] == 0 {
			return i, "contains U+0000"
		}
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i, fmt.Sprintf("contains invalid UTF-8 (byte 0x%02x)", b[i])
		}
		i += size
	}
	return -1, "" // unreachable: b is not valid UTF-8
}

// TruncateRunes cuts s to at most n runes, whole runes only, and says whether it cut.
func TruncateRunes(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	count := 0
	for i := range s {
		if count == n {
			return s[:i], true
		}
		count++
	}
	return s, false
}

// Shorten is s cut to at most n runes, the cut marked with an ellipsis.
func Shorten(s string, n int) string {
	if cut, ok := TruncateRunes(s, n); ok {
		return cut + "…"
	}
	return s
}

// CleanText replaces each U+0000 and each byte that does not start valid UTF-8 in s with U+FFFD,
// as ranging over a string does, and as encoding/json decodes such bytes. It returns s itself when
// there is nothing to replace.
func CleanText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		if r == 0 {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String()
}

// CheckJSON reports the first string (value or member name) in the JSON document raw that
// PostgreSQL cannot store: U+0000, written raw or as \u0000, a lone surrogate escape, or invalid
// UTF-8. The *TextError names it by its path under field, the document's own name ("" for a
// request body, whose top-level members then name themselves). It returns nil when there is
// none; a document without backslash-u escapes and with valid UTF-8, nearly every one, is
// checked in one pass that allocates nothing. Syntax is not its concern: a malformed document is
// checked as far as it can be read.
func CheckJSON(field string, raw json.RawMessage) error {
	at, problem := jsonProblem(raw)
	if at < 0 {
		return nil
	}
	path, inName := jsonPathAt(raw, at)
	if inName {
		problem = "has a member name that " + problem
	}
	return &TextError{Field: joinPath(field, path), Problem: problem}
}

// jsonProblem returns the offset of the first thing in raw that PostgreSQL refuses, and what it
// is; the offset is -1 when there is none.
func jsonProblem(raw []byte) (at int, problem string) {
	at, problem = textProblem(raw)
	if e, _, r := nextBadEscape(raw, 0); e >= 0 && (at < 0 || e < at) {
		at, problem = e, escapeProblem(r)
	}
	if n, size := nextBadNumber(raw, 0); n >= 0 && (at < 0 || n < at) {
		at, problem = n, fmt.Sprintf("holds a number beyond the range of numeric (%s)", Shorten(string(raw[n:n+size]), 24))
	}
	return at, problem
}

// The range of PostgreSQL's numeric, in which jsonb keeps every number: at most 131072 digits
// before the decimal point and 16383 after it, and an exponent as written under 2^30 - 1.
const (
	numericMaxLeadingExponent = 131071 // of the first significant digit: 1e131071 fits, 1e131072 does not
	numericMaxScale           = 16383  // digits after the point, trailing zeros included: 0e-16384 does not fit
	numericMaxExponent        = 1<<30 - 1
)

// nextBadNumber returns the offset and length of the first number in b at or after from that
// numeric cannot hold, outside strings, or -1. A document shorter than the longest fraction numeric
// holds and without an e anywhere is let through after one search; any other is scanned, from
// quote to quote through its strings (most of a span's attributes), which it skips.
func nextBadNumber(b []byte, from int) (at, n int) {
	if len(b) <= numericMaxScale && !bytes.ContainsAny(b, "eE") {
		return -1, 0
	}
	for i := from; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			if i = ClosingQuote(b, i); i < 0 {
				return -1, 0 // an unterminated string: no number after it
			}
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(b) && strings.IndexByte("0123456789.eE+-", b[j]) >= 0 {
				j++
			}
			if !numericHolds(b[i:j]) {
				return i, j - i
			}
			i = j - 1
		}
	}
	return -1, 0
}

// numericHolds reports whether the JSON number num fits PostgreSQL's numeric, as numeric_in
// decides: the exponent as written, the scale (digits after the point less the exponent), and the
// position of the first significant digit. Something that is not a number is not its concern.
func numericHolds(num []byte) bool {
	if len(num) > 0 && num[0] == '-' {
		num = num[1:]
	}
	mantissa, exponent := num, 0
	if e := bytes.IndexAny(num, "eE"); e >= 0 {
		mantissa = num[:e]
		digits := num[e+1:]
		negative := len(digits) > 0 && digits[0] == '-'
		if len(digits) > 0 && (digits[0] == '-' || digits[0] == '+') {
			digits = digits[1:]
		}
		for _, d := range digits {
			if d < '0' || d > '9' {
				return true
			}
			if exponent = exponent*10 + int(d-'0'); exponent >= numericMaxExponent {
				return false
			}
		}
		if negative {
			exponent = -exponent
		}
	}
	whole, fraction := mantissa, []byte(nil)
	if dot := bytes.IndexByte(mantissa, '.'); dot >= 0 {
		whole, fraction = mantissa[:dot], mantissa[dot+1:]
	}
	if len(fraction)-exponent > numericMaxScale {
		return false
	}
	// The power of ten of the first significant digit, counted from the point.
	var lead int
	if i := bytes.IndexFunc(whole, notZero); i >= 0 {
		lead = len(whole) - 1 - i
	} else if i := bytes.IndexFunc(fraction, notZero); i >= 0 {
		lead = -1 - i
	} else { // zero, whatever its exponent
		return true
	}
	return lead+exponent <= numericMaxLeadingExponent
}

func escapeProblem(r rune) string {
	if r == 0 {
		return "contains U+0000"
	}
	return fmt.Sprintf(`contains a lone UTF-16 surrogate (\u%04x)`, r)
}

// nextBadEscape returns the offset of the first \u0000 or lone surrogate escape in b at or after
// from, which must not be inside an escape, with the escape's length and the code it escapes; the
// offset is -1 when there is none. Backslashes only occur inside JSON strings, and each escape is
// skipped whole, so an escaped backslash followed by "u0000" is text, not an escape.
func nextBadEscape(b []byte, from int) (at, n int, r rune) {
	for i := from; i < len(b); {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			break
		}
		i += j
		if i+1 >= len(b) || b[i+1] != 'u' {
			i += 2 // an escaped character, possibly a backslash
			continue
		}
		r, ok := hex4(b, i+2)
		switch {
		case !ok: // not an escape that JSON allows; the parser's problem
		case r == 0:
			return i, 6, r
		case r >= 0xd800 && r < 0xdc00: // a high surrogate needs a low one right after it
			if lo, ok := hex4(b, i+8); ok && b[i+6] == '\\' && b[i+7] == 'u' && lo >= 0xdc00 && lo < 0xe000 {
				i += 12
				continue
			}
			return i, 6, r
		case r >= 0xdc00 && r < 0xe000:
			return i, 6, r
		}
		i += 2
	}
	return -1, 0, 0
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// jsonPathAt reads raw token by token up to the string that holds offset at, and returns that
// string's path (slash-separated, each segment escaped as in a JSON pointer) and whether it is a
// member name, in which case the path is its object's. It only runs once a problem is found.
func jsonPathAt(raw []byte, at int) (path string, inName bool) {
	type level struct {
		object bool
		key    string // the current member's name, in an object
		index  int    // the next element's index, in an array
		inKey  bool   // the next string of an object is a member name
	}
	var stack []level
	segments := func() string {
		parts := make([]string, len(stack))
		for i, l := range stack {
			if l.object {
				parts[i] = pointerEscaper.Replace(l.key)
			} else {
				parts[i] = strconv.Itoa(l.index - 1)
			}
		}
		return strings.Join(parts, "/")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		// Each token read at an array's own level starts its next element.
		if n := len(stack); n > 0 && !stack[n-1].object && dec.More() {
			stack[n-1].index++
		}
		tok, err := dec.Token()
		if err != nil { // the end, or a syntax error before the problem
			return segments(), false
		}
		n := len(stack)
		name := n > 0 && stack[n-1].object && stack[n-1].inKey
		if dec.InputOffset() > int64(at) {
			if name {
				stack = stack[:n-1] // the object's path, not its member's
			}
			return segments(), name
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, level{object: true, inKey: true})
				continue
			case '[':
				stack = append(stack, level{})
				continue
			default:
				stack = stack[:n-1]
			}
		case string:
			if name {
				stack[n-1].key, stack[n-1].inKey = t, false
				continue
			}
		}
		// A value ended: the enclosing object expects a member name next.
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].inKey = true
		}
	}
}

// pointerEscaper escapes a path segment as a JSON pointer does (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// joinPath puts path under field, slash-separated.
func joinPath(field, path string) string {
	switch {
	case field == "":
		return path
	case path == "":
		return field
	}
	return field + "/" + path
}

// CleanJSON makes a JSON document storable in json and jsonb columns: each \u0000 escape and each
// lone surrogate escape becomes the escape \ufffd, and each U+0000 byte and each byte that does
// not start valid UTF-8 becomes U+FFFD (see CleanText). U+FFFD rather than the six characters
// "\u0000" as text: it is what encoding/json already reads the other two as, so one mark stands
// for every character that could not be kept, and no reader mistakes it for something written. A
// number beyond numeric's range becomes a string of its characters. A document with nothing to
// replace is returned as is, the same bytes, after one scan (UTF-8 validation and a search for
// backslashes and exponents) that allocates nothing; nothing is decoded or re-encoded.
func CleanJSON(raw json.RawMessage) json.RawMessage {
	if at, _ := jsonProblem(raw); at < 0 {
		return raw
	}
	b := []byte(raw)
	if at, _ := textProblem(b); at >= 0 {
		// Replacing bytes that are not backslashes leaves every escape where it was.
		b = []byte(CleanText(string(b)))
	}
	var out []byte // nil until the first replacement
	done := 0      // b[:done] is in out
	for i := 0; ; {
		at, n, _ := nextBadEscape(b, i)
		if at < 0 {
			break
		}
		out = append(append(out, b[done:at]...), `\ufffd`...)
		done, i = at+n, at+n
	}
	if out != nil {
		b = append(out, b[done:]...)
	}
	return quoteBadNumbers(b)
}

// ClosingQuote returns the offset of the quote that closes the JSON string opened at b[open], or
// -1. It jumps from quote to quote (a long string value is most of an attribute object's bytes)
// and counts the backslashes before each: an even number leaves the quote unescaped.
func ClosingQuote(b []byte, open int) int {
	for j := open + 1; ; j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		backslashes := 0
		for p := j - 1; p > open && b[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return j
		}
	}
}

func notZero(r rune) bool { return r != '0' }

// quoteBadNumbers turns each number of b that numeric cannot hold into a string of the same
// characters, so that a recorded value keeps what it said, and returns b itself when there is none.
func quoteBadNumbers(b []byte) []byte {
	var out []byte
	done := 0
	for i := 0; ; {
		at, n := nextBadNumber(b, i)
		if at < 0 {
			break
		}
		out = append(append(append(append(out, b[done:at]...), '"'), b[at:at+n]...), '"')
		done, i = at+n, at+n
	}
	if out == nil {
		return b
	}
	return append(out, b[done:]...)
}

// ContainsWord reports whether s holds word, as bytes.Contains does, faster on text: it looks for
// the word's rarest letter (by English letter frequency) and compares the rest around it, where
// bytes.Contains looks for its first byte, for "interrupt" an "i", a letter every ten or so
// bytes of prose. Ingest asks it of every span's attributes, a kilobyte each.
func ContainsWord(s []byte, word string) bool {
	if word == "" {
		return true
	}
	anchor := rarestLetter(word)
	c := word[anchor]
	for i := anchor; i < len(s); i++ {
		j := bytes.IndexByte(s[i:], c)
		if j < 0 {
			return false
		}
		i += j
		if start := i - anchor; start+len(word) <= len(s) && string(s[start:start+len(word)]) == word {
			return true
		}
	}
	return false
}

// letterRank ranks the lowercase letters from the most frequent in English prose to the least.
const letterRank = "etaoinshrdlcumwfgypbvkjxqz"

// rarestLetter is the index in word of its least frequent lowercase letter, or 0 when it has none.
func rarestLetter(word string) int {
	best, rank := 0, -1
	for i := 0; i < len(word); i++ {
		if r := strings.IndexByte(letterRank, word[i]); r > rank {
			best, rank = i, r
		}
	}
	return best
}
