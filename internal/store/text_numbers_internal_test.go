package store

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nextBadNumberByByte is nextBadNumber as it was before it skipped strings from quote to quote:
// every byte looked at, the reference FuzzNextBadNumber holds it to.
func nextBadNumberByByte(b []byte, from int) (at, n int) {
	inString := false
	for i := from; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
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

func FuzzNextBadNumber(f *testing.F) {
	for _, seed := range []string{`{"a":"1e999999","b":1e999999}`, `["\\",1e999999]`, `["\\\"",1e999999]`, `"\\\\"1e999999`,
		`{"x":"e\"1e999999\"","y":2}`, `"unterminated 1e999999`, `[1, "a\\\\\\"b", 1e131072]`, `{"k":"v"}`} {
		f.Add([]byte(seed), 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, from int) {
		if from < 0 || from > len(b) {
			return
		}
		wantAt, wantN := nextBadNumberByByte(b, from)
		at, n := nextBadNumber(b, from)
		if wantAt >= 0 || len(b) > numericMaxScale || strings.ContainsAny(string(b), "eE") {
			require.Equal(t, [2]int{wantAt, wantN}, [2]int{at, n}, "%q from %d", b, from)
		}
	})
}
