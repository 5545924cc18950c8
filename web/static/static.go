// Package static embeds Loupe's CSS and JavaScript and serves each file at a URL that carries a
// hash of its content, so browsers may cache it forever.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed *.css *.js *.svg
var files embed.FS

// Prefix is the URL path under which assets are served.
const Prefix = "/static/"

type asset struct {
	body        []byte
	contentType string
}

var (
	byURL  = map[string]asset{}  // "/static/app.3f2a….css" -> asset
	urlFor = map[string]string{} // "app.css" -> "/static/app.3f2a….css"
)

func init() {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		body, err := files.ReadFile(e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		ext := path.Ext(e.Name())
		hashed := Prefix + strings.TrimSuffix(e.Name(), ext) + "." + hex.EncodeToString(sum[:6]) + ext
		urlFor[e.Name()] = hashed
		byURL[hashed] = asset{body: body, contentType: mime.TypeByExtension(ext)}
	}
}

// URL returns the content-hashed URL of an embedded asset, such as URL("app.css"). It panics on an
// unknown name, which is a programming error caught by any test that renders a page.
func URL(name string) string {
	u, ok := urlFor[name]
	if !ok {
		panic("static: no asset named " + name)
	}
	return u
}

// Handler serves the embedded assets at their hashed URLs with an immutable cache policy. Any other
// path under Prefix is a 404, so a stale URL never gets the wrong content.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := byURL[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", a.contentType)
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(a.body)
	})
}
