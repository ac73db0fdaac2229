package temporalclient_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/temporalclient"
)

func TestMain(m *testing.M) { testinfra.Main(m) }

func baseConfig(t *testing.T, env map[string]string) config.Config {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	return cfg
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testinfra.SyncBuffer

func writeKeyPair(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "weft-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certPath, keyPath
}

func TestOptions(t *testing.T) {
	certPath, keyPath := writeKeyPair(t)
	tests := []struct {
		name     string
		env      map[string]string
		wantTLS  bool
		wantCred bool
		wantErr  string
	}{
		{name: "plain", env: map[string]string{"TEMPORAL_ADDRESS": "temporal:7233", "TEMPORAL_NAMESPACE": "ns"}},
		{name: "api key", env: map[string]string{"TEMPORAL_API_KEY": "secret-key"}, wantTLS: true, wantCred: true},
		{name: "mtls", env: map[string]string{"TEMPORAL_TLS_CERT": certPath, "TEMPORAL_TLS_KEY": keyPath}, wantTLS: true, wantCred: true},
		{name: "mtls bad files", env: map[string]string{"TEMPORAL_TLS_CERT": keyPath, "TEMPORAL_TLS_KEY": certPath}, wantErr: "load TLS key pair"},
		{name: "both", env: map[string]string{"TEMPORAL_TLS_CERT": certPath, "TEMPORAL_TLS_KEY": keyPath, "TEMPORAL_API_KEY": "k"}, wantErr: "not both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(t, tc.env)
			opts, err := temporalclient.Options(cfg, slog.New(slog.DiscardHandler))
			if tc.wantErr != "" {
				require.Error(t, err, "err = %v, want %q", err, tc.wantErr)
				require.Contains(t, err.Error(), tc.wantErr, "err = %v, want %q", err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.False(t, opts.HostPort != cfg.TemporalAddress || opts.Namespace != cfg.TemporalNamespace, "address/namespace = %s/%s", opts.HostPort, opts.Namespace)
			assert.Equal(t, tc.wantTLS, opts.ConnectionOptions.TLS != nil, "TLS = %v, want %v", opts.ConnectionOptions.TLS != nil, tc.wantTLS)
			assert.Equal(t, tc.wantCred, opts.Credentials != nil, "credentials = %v, want %v", opts.Credentials != nil, tc.wantCred)
			assert.True(t, opts.Logger != nil, "no SDK logger: SDK logs would not be JSON")
		})
	}
}

func TestDialDevServer(t *testing.T) {
	srv, err := testinfra.SharedTemporal()
	require.NoError(t, err)
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	cfg := baseConfig(t, map[string]string{"TEMPORAL_ADDRESS": srv.HostPort})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := temporalclient.Dial(ctx, cfg, logger, nil)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err)
	// Every line is JSON, including the SDK's own.
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		assert.True(t, json.Valid([]byte(line)), "log line is not JSON: %s", line)
	}
	assert.Contains(t, logs.String(), `"auth":"none"`, "connection log missing: %s", logs.String())
}

// TestAPIKeyNeverLogged dials the plaintext dev server with an API key (so
// TLS fails) and checks the key shows up in neither the error nor the logs.
func TestAPIKeyNeverLogged(t *testing.T) {
	srv, err := testinfra.SharedTemporal()
	require.NoError(t, err)
	const key = "weft-test-api-key-do-not-log-me"
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := baseConfig(t, map[string]string{"TEMPORAL_ADDRESS": srv.HostPort, "TEMPORAL_API_KEY": key})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := temporalclient.Dial(ctx, cfg, logger, nil)
	if err == nil {
		c.Close()
	}
	require.Error(t, err, "TLS dial to a plaintext server succeeded")
	require.NotContains(t, err.Error(), key, "API key leaked: err=%v logs=%s", err, logs.String())
	require.NotContains(t, logs.String(), key, "API key leaked: err=%v logs=%s", err, logs.String())
}

func TestLoopbackConnectionsAreNotCompressed(t *testing.T) {
	for addr, want := range map[string]bool{
		"localhost:7233": true, "127.0.0.1:7233": true, "[::1]:7233": true,
		"temporal:7233": false, "ns.acct.tmprl.cloud:7233": false, "10.0.0.5:7233": false,
	} {
		got := temporalclient.Loopback(addr)
		assert.Equal(t, want, got, "Loopback(%q) = %v", addr, got)
		opts, err := temporalclient.Options(config.Config{TemporalAddress: addr, TemporalNamespace: "default"}, nil)
		require.NoError(t, err)
		_, none := opts.ConnectionOptions.GrpcCompression.(*client.GrpcCompressionNone)
		assert.Equal(t, want, none, "%s: compression %T", addr, opts.ConnectionOptions.GrpcCompression)
	}
}

// An ordinary cancellation's SDK records go to DEBUG; real failures stay.
func TestCancellationNoiseIsQuiet(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts, err := temporalclient.Options(config.Config{TemporalAddress: "localhost:7233", TemporalNamespace: "default"}, logger)
	require.NoError(t, err)
	opts.Logger.Error("Activity error.", "ActivityType", "weft.Action", "Error", "context canceled")
	opts.Logger.Warn("RecordActivityHeartbeat with error", "Error", "canceled")
	require.Equal(t, 0, buf.Len(), "cancellation logged above DEBUG: %s", buf.String())
	opts.Logger.Error("Activity error.", "ActivityType", "weft.Action", "Error", "node \"a\": boom (type: ACTION_FAILED)")
	require.Contains(t, buf.String(), `"level":"ERROR"`, "a real failure was hidden: %q", buf.String())
	require.Contains(t, buf.String(), "boom", "a real failure was hidden: %q", buf.String())
}
