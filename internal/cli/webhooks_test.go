package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWebhookSecretsNeverInHelp: the secret and the URLs (whose path often holds a token) come
// from the environment, and --help never prints them.
func TestWebhookSecretsNeverInHelp(t *testing.T) {
	t.Setenv("LOUPE_WEBHOOK_SECRET", "whsec-hunter2")
	t.Setenv("LOUPE_WEBHOOK_URLS", "https://hooks.slack.com/services/T0/B0/tok3n")
	for _, args := range [][]string{{"serve", "--help"}, {"worker", "--help"}} {
		cmd := newRootCommand(demoProgram())
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		require.NoError(t, cmd.ExecuteContext(context.Background()), args)
		require.Contains(t, out.String(), "--webhook ", args)
		require.Contains(t, out.String(), "--webhook-secret-file", args)
		require.NotContains(t, out.String(), "hunter2", args)
		require.NotContains(t, out.String(), "tok3n", args)
	}
}

func TestWebhooksConfigFromFlagsAndEnvironment(t *testing.T) {
	t.Setenv("LOUPE_WEBHOOK_URLS", "https://a.example/x, https://b.example/y")
	t.Setenv("LOUPE_WEBHOOK_SECRET", "from-env")
	t.Setenv("LOUPE_WEBHOOK_SECRET_FILE", "")
	c, err := webhooksConfig(engineOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"https://a.example/x", "https://b.example/y"}, c.URLs)
	require.Equal(t, "from-env", string(c.Secret))

	file := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(file, []byte("from-file\n"), 0o600))
	c, err = webhooksConfig(engineOptions{webhooks: []string{"https://c.example/z"}, webhookSecretFile: file})
	require.NoError(t, err)
	require.Equal(t, []string{"https://c.example/z"}, c.URLs, "--webhook replaces the environment's list")
	require.Equal(t, "from-file", string(c.Secret))

	_, err = webhooksConfig(engineOptions{webhooks: []string{"ftp://h/tok3n"}})
	require.ErrorContains(t, err, "ftp://h/…")
	require.NotContains(t, err.Error(), "tok3n")
}
