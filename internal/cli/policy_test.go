package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestPolicyCommandsCheckApplyAndTryADraft checks a policy file, refuses a broken one naming its
// line, tries a draft on past decisions (a denial a rule would approve is listed), and stores it
// as the version in force, which then decides the next interrupt.
func TestPolicyCommandsCheckApplyAndTryADraft(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewURL(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(good, []byte(`rules:
  - name: small
    tool: transfer
    when: input.amount < 100
    decide: approve
    reason: small amounts need no review
`), 0o644))
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("rules:\n  - name: small\n    when: input.amount <\n    decide: approve\n"), 0o644))

	out, _, err := devui(t, dbURL, "policy", "check", good)
	require.NoError(t, err)
	require.Contains(t, out, "small")
	require.Contains(t, out, "input.amount < 100")
	_, _, err = devui(t, dbURL, "policy", "check", bad)
	require.ErrorContains(t, err, `bad.yaml: policy line 2 rule "small"`)

	// A person denied a small transfer.
	_, _, err = devui(t, dbURL, "run", "transferMoney", "--input", `{"to":"ann","amount":40,"currency":"EUR"}`, "--wait")
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	out, _, err = devui(t, dbURL, "interrupts", "list")
	require.NoError(t, err)
	id := firstField(t, out)
	_, _, err = devui(t, dbURL, "interrupts", "resolve", id, "--deny", "--comment", "not today")
	require.NoError(t, err)

	out, _, err = devui(t, dbURL, "policy", "whatif", good, "--last", "10")
	require.NoError(t, err)
	require.Contains(t, out, "1 interrupts: 1 approved, 0 denied, 0 left to a person")
	require.Contains(t, out, "1 disagreements with the decisions made")
	require.Contains(t, out, id)

	out, _, err = devui(t, dbURL, "policy", "apply", good)
	require.NoError(t, err)
	require.Contains(t, out, "policy version 1 is in force")
	out, _, err = devui(t, dbURL, "policy", "apply", good)
	require.NoError(t, err)
	require.Contains(t, out, "in force already")

	out, _, err = devui(t, dbURL, "run", "transferMoney", "--input", `{"to":"bea","amount":30,"currency":"EUR"}`, "--wait")
	require.NoError(t, err, "the policy approves it: the run succeeds without a person")
	require.Contains(t, out, "sent 30 EUR to bea")
}

// firstField is the first column of the first row under a table's header.
func firstField(t *testing.T, table string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	require.GreaterOrEqual(t, len(lines), 2, table)
	return strings.Fields(lines[1])[0]
}
