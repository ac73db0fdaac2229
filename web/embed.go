// Package web serves the canvas: the single-page application in web/src,
// built by Vite into web/dist (committed, so neither `make dev` nor
// `make test` needs Node) and embedded in the binary. The API process
// serves it under /ui/; every /ui/ path that is not a built file (a deep
// link such as /ui/runs/{id}) is answered with the app's index.html, which
// routes in the browser. The browser only observes and requests: every
// rule stays in the API, which the canvas calls with the user's token.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// Prefix is where the canvas is served.
const Prefix = "/ui/"

// Cache policies: built assets carry a content hash in their name and never
// change; index.html names the current assets and must be revalidated.
const (
	cacheImmutable  = "public, max-age=31536000, immutable"
	cacheRevalidate = "no-cache"
)

// contentSecurityPolicy confines the canvas to its own origin: scripts and
// API calls only from here, no framing. React Flow positions nodes with
// inline styles, hence 'unsafe-inline' for styles (never for scripts).
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// Handler serves the embedded canvas under Prefix.
func Handler() http.Handler {
	files, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return &spa{files: files, assets: http.FileServerFS(files)}
}

// Mount returns a handler serving the canvas under /ui/ (and redirecting /
// and /ui there) and everything else with api.
func Mount(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	ui := Handler()
	mux.Handle(Prefix, ui)
	mux.Handle("/ui", http.RedirectHandler(Prefix, http.StatusMovedPermanently))
	mux.Handle("GET /{$}", http.RedirectHandler(Prefix, http.StatusFound))
	mux.Handle("/", api)
	return mux
}

type spa struct {
	files  fs.FS
	assets http.Handler
}

func (s *spa) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, Prefix)), "/")
	if name != "" && name != "index.html" {
		if st, err := fs.Stat(s.files, name); err == nil && !st.IsDir() {
			if strings.HasPrefix(name, "assets/") {
				h.Set("Cache-Control", cacheImmutable)
			} else {
				h.Set("Cache-Control", cacheRevalidate)
			}
			req := r.Clone(r.Context())
			req.URL.Path = "/" + name
			s.assets.ServeHTTP(w, req)
			return
		}
		// A missing file is a 404, not the app: a stale page asking for an
		// asset of an older build must not receive HTML as JavaScript.
		// Deep links have no extension (workflow keys and run ids hold no dot).
		if strings.HasPrefix(name, "assets/") || strings.Contains(path.Base(name), ".") {
			http.NotFound(w, r)
			return
		}
	}
	index, err := fs.ReadFile(s.files, "index.html")
	if err != nil {
		http.Error(w, "the canvas is not built (make web)", http.StatusInternalServerError)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", cacheRevalidate)
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(index)
	}
}
