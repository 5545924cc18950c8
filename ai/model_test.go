package ai_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/ai"
)

// TestProviderInfoReadsBackFromStoredJSON: what a model put in Custom as a ProviderInfo (value or
// pointer) reads back the same from the response's JSON, which is how a stored model call holds
// it; a Custom of another shape reads as the zero value.
func TestProviderInfoReadsBackFromStoredJSON(t *testing.T) {
	want := ai.ProviderInfo{RequestID: "req_01", ResponseID: "msg_01", Model: "claude-x-20261101"}
	for _, custom := range []any{want, &want} {
		resp := &ai.ModelResponse{Custom: custom}
		require.Equal(t, want, resp.Provider())
		b, err := json.Marshal(resp)
		require.NoError(t, err)
		require.JSONEq(t, `{"custom":{"requestId":"req_01","responseId":"msg_01","model":"claude-x-20261101"}}`, string(b))
		var back ai.ModelResponse
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, want, back.Provider())
	}
	require.Equal(t, ai.ProviderInfo{}, (&ai.ModelResponse{Custom: []any{1}}).Provider())
	require.Equal(t, ai.ProviderInfo{}, (*ai.ModelResponse)(nil).Provider())
	require.Equal(t, ai.ProviderInfo{}, (&ai.ModelResponse{Custom: (*ai.ProviderInfo)(nil)}).Provider())
}
