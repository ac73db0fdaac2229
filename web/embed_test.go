package web_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/weftworks/weft/web"
)

func serve(h http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// TestCanvasIsServed: deep links answer the app (revalidated, under a
// content security policy), built assets are cached for good, a missing
// asset is a 404 rather than HTML, and everything outside /ui/ reaches the
// API.
func TestCanvasIsServed(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-From", "api")
		w.WriteHeader(http.StatusTeapot)
	})
	h := web.Mount(api)

	index := serve(h, http.MethodGet, "/ui/")
	if index.Code != http.StatusOK || !strings.Contains(index.Body.String(), `<div id="root">`) {
		t.Fatalf("/ui/: %d %s", index.Code, index.Body)
	}
	for _, path := range []string{"/ui/workflows", "/ui/workflows/diamond", "/ui/workflows/diamond/revisions/2",
		"/ui/runs", "/ui/runs/2fb67755-be03-49b6-8cf8-065d1999b931", "/ui/index.html"} {
		rec := serve(h, http.MethodGet, path)
		if rec.Code != http.StatusOK || rec.Body.String() != index.Body.String() {
			t.Errorf("%s: %d, not the app", path, rec.Code)
		}
		for k, want := range map[string]string{
			"Cache-Control":           "no-cache",
			"Content-Type":            "text/html; charset=utf-8",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
			"Content-Security-Policy": "default-src 'self'; script-src 'self';",
		} {
			if got := rec.Header().Get(k); !strings.HasPrefix(got, want) {
				t.Errorf("%s: %s = %q, want %q", path, k, got, want)
			}
		}
	}
	if rec := serve(h, http.MethodHead, "/ui/runs/x"); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("HEAD: %d with %d bytes", rec.Code, rec.Body.Len())
	}

	// Every asset index.html names is served, cached as immutable.
	assets := regexp.MustCompile(`/ui/(assets/[^"]+)`).FindAllStringSubmatch(index.Body.String(), -1)
	if len(assets) == 0 {
		t.Fatal("index.html names no assets")
	}
	for _, m := range assets {
		rec := serve(h, http.MethodGet, "/ui/"+m[1])
		if rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Errorf("%s: %d", m[1], rec.Code)
		}
		if got := rec.Header().Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("%s: Cache-Control %q", m[1], got)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.Contains(ct, "javascript") && !strings.Contains(ct, "css") {
			t.Errorf("%s: Content-Type %q", m[1], ct)
		}
	}

	for path, want := range map[string]int{
		"/ui/assets/index-gone.js": http.StatusNotFound, // a stale page's old asset
		"/ui/favicon.ico":          http.StatusNotFound,
	} {
		if rec := serve(h, http.MethodGet, path); rec.Code != want {
			t.Errorf("%s: %d, want %d", path, rec.Code, want)
		}
	}
	// Nothing outside the bundle, even past the mux's own path cleaning.
	if rec := serve(web.Handler(), http.MethodGet, "/ui/../../go.mod"); rec.Code != http.StatusNotFound {
		t.Errorf("/ui/../../go.mod: %d", rec.Code)
	}
	if rec := serve(h, http.MethodPost, "/ui/runs"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/runs: %d", rec.Code)
	}
	for path, to := range map[string]string{"/": "/ui/", "/ui": "/ui/"} {
		rec := serve(h, http.MethodGet, path)
		if rec.Code/100 != 3 || rec.Header().Get("Location") != to {
			t.Errorf("%s: %d to %q, want a redirect to %s", path, rec.Code, rec.Header().Get("Location"), to)
		}
	}
	for _, path := range []string{"/v1/workflows", "/healthz", "/hooks/x", "/metrics"} {
		if rec := serve(h, http.MethodGet, path); rec.Code != http.StatusTeapot || rec.Header().Get("X-From") != "api" {
			t.Errorf("%s did not reach the API: %d", path, rec.Code)
		}
	}
	if rec := serve(h, http.MethodPost, "/"); rec.Code != http.StatusTeapot {
		t.Errorf("POST / did not reach the API: %d", rec.Code)
	}
}

// TestBundleIsBuilt: the embedded bundle is a Vite build for /ui/ (make web).
func TestBundleIsBuilt(t *testing.T) {
	rec := serve(web.Handler(), http.MethodGet, "/ui/")
	if !strings.Contains(rec.Body.String(), `src="/ui/assets/`) {
		t.Fatalf("index.html does not load /ui/assets/: %s", rec.Body)
	}
}
