package trace

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSanitizeJSONReplacesWhatPostgreSQLCannotTurnIntoText(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"plain"}`:                `{"a":"plain"}`,
		`{"a":"x\u0000y"}`:             `{"a":"x\ufffdy"}`,
		`{"a":"\ud800x"}`:              `{"a":"\ufffdx"}`,      // lone high surrogate
		`{"a":"\udc00"}`:               `{"a":"\ufffd"}`,       // lone low surrogate
		`{"a":"\ud800\u0041"}`:         `{"a":"\ufffd\u0041"}`, // high surrogate, then no low one
		`{"a":"\ud83d\ude00"}`:         `{"a":"\ud83d\ude00"}`, // a valid pair stays
		`{"a":"\\u0000"}`:              `{"a":"\\u0000"}`,      // an escaped backslash, then text
		`{"a":"\\\u0000","\u00e9":1}`:  `{"a":"\\\ufffd","\u00e9":1}`,
		`{"\u0000":"\uD800","b":"ok"}`: `{"\ufffd":"\ufffd","b":"ok"}`,
		"{\"a\":\"x\xffy\"}":           "{\"a\":\"x\uFFFDy\"}", // invalid UTF-8
	} {
		got := string(sanitizeJSON([]byte(in)))
		require.Equal(t, want, got, "sanitizeJSON(%s)", in)
		require.True(t, json.Valid([]byte(got)), got)
	}
}

func TestSanitizeTextReplacesNULAndInvalidUTF8(t *testing.T) {
	require.Equal(t, "plain é", sanitizeText("plain é"))
	require.Equal(t, "a\uFFFDb", sanitizeText("a\x00b"))
	require.Equal(t, "a\uFFFDb", sanitizeText("a\xffb"))
}
