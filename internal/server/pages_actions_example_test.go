package server

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExampleForLeavesOptionalFieldsOut: the run form starts from the required properties only;
// an optional boolean is not pre-filled with false, nor an optional number with 0, since "not
// set" and false are different inputs.
func TestExampleForLeavesOptionalFieldsOut(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","required":["destination","trip"],"properties":{
		"destination":{"type":"string"},"approve":{"type":"boolean"},"nights":{"type":"integer","minimum":1},
		"trip":{"type":"object","required":["class"],"properties":{"class":{"enum":["economy","business"]},"window":{"type":"boolean"}}}}}`)
	got, err := json.Marshal(exampleFor(schema))
	require.NoError(t, err)
	require.JSONEq(t, `{"destination":"","trip":{"class":"economy"}}`, string(got))
}
