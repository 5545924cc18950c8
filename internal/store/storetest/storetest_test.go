package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestClusterDirIsPerCheckout proves two checkouts get two test clusters, under the name the
// Makefile computes for the same checkout (sha256 of its path, 12 hex digits).
func TestClusterDirIsPerCheckout(t *testing.T) {
	t.Setenv("LOUPE_TEST_DATA_DIR", "")
	root := moduleRoot()
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("moduleRoot() = %q has no go.mod", root)
	}
	sum := sha256.Sum256([]byte(root))
	want := filepath.Join(os.TempDir(), fmt.Sprintf("loupe-test-%d-%s", os.Getuid(), hex.EncodeToString(sum[:])[:12]))
	if got := ClusterDir(); got != want {
		t.Fatalf("ClusterDir() = %q, want %q", got, want)
	}
	if checkoutKey("/src/a/loupe") == checkoutKey("/src/b/loupe") {
		t.Fatal("two checkouts share a cluster key")
	}
	t.Setenv("LOUPE_TEST_DATA_DIR", "/elsewhere")
	if got := ClusterDir(); got != "/elsewhere" {
		t.Fatalf("LOUPE_TEST_DATA_DIR is not honoured: %q", got)
	}
}
