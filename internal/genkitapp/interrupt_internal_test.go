package genkitapp

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
)

// TestAppErrorsReadAsInterrupts reads the errors Genkit JS 1.42 and Genkit Go 1.4.0 answer a tool
// run on its own that interrupts (as captured from the compat apps) as the tool's interrupt:
// FAILED_PRECONDITION, Go's metadata kept; any other error stays as it is.
func TestAppErrorsReadAsInterrupts(t *testing.T) {
	t.Parallel()
	var js, goErr, other ActionError
	require.NoError(t, json.Unmarshal([]byte(`{"code":13,"message":"","details":{"stack":"ToolInterruptError\n    at file:///app/node_modules/@genkit-ai/ai/lib/tool.mjs:204:11","traceId":"044dc1d8bd417626f5c5ae995d645c2b"}}`), &js))
	require.NoError(t, json.Unmarshal([]byte(`{"details":{"traceId":"e7fcd0e4da87362667e0bc400a8b396f"},"message":"tool execution interrupted: \n\n{\n  \"message\": \"Send 5 to Bob?\"\n}","code":500}`), &goErr))
	require.NoError(t, json.Unmarshal([]byte(`{"code":13,"message":"boom","details":{"stack":"Error: boom\n    at x"}}`), &other))

	err := asInterrupted("/tool/approveTransfer", &js)
	require.Equal(t, engine.StatusFailedPrecondition, engine.StatusOf(err))
	require.Contains(t, err.Error(), "approveTransfer interrupted to ask a person")
	require.Contains(t, err.Error(), "does not pass on the interrupt's metadata")
	var ie *engine.InterruptError
	require.True(t, errors.As(err, &ie))
	require.Nil(t, ie.Metadata)

	err = asInterrupted("/tool.v2/approveTransfer", &goErr)
	require.Equal(t, engine.StatusFailedPrecondition, engine.StatusOf(err))
	require.Contains(t, err.Error(), `approveTransfer interrupted to ask a person ("Send 5 to Bob?")`)
	require.True(t, errors.As(err, &ie))
	require.Equal(t, map[string]any{"message": "Send 5 to Bob?"}, ie.Metadata)

	require.Same(t, error(&other), asInterrupted("/tool/x", &other))
	require.NoError(t, asInterrupted("/tool/x", nil))
}
