package app

import (
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHTTPURL(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8080":     "http://localhost:8080",
		"[::]:8080":        "http://localhost:8080",
		"127.0.0.1:9000":   "http://localhost:9000",
		"10.1.2.3:8080":    "http://10.1.2.3:8080",
		"[2001:db8::1]:80": "http://[2001:db8::1]:80",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		require.NoError(t, err)
		got := httpURL(tcp)
		assert.Equal(t, want, got, "httpURL(%s) = %s, want %s", addr, got, want)
	}
}

func TestBanner(t *testing.T) {
	var b strings.Builder
	printBanner(&b, bannerInfo{API: "http://localhost:8080", Temporal: "localhost:7233", Namespace: "default",
		UI: "http://localhost:8233", DataDir: ".weft", Token: "tok"})
	out := b.String()
	for _, want := range []string{
		"Temporal Web UI http://localhost:8233",
		"\nexport WEFT_TOKEN=tok\n",
		`curl -H "Authorization: Bearer $WEFT_TOKEN" http://localhost:8080/v1/workflows`,
		"  Canvas          http://localhost:8080/ui/\n",
		"\n  http://localhost:8080/ui/#token=tok\n",
	} {
		assert.Contains(t, out, want, "banner lacks %q:\n%s", want, out)
	}
}
