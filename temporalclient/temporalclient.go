// Package temporalclient dials Temporal the way every weft process does:
// the address, namespace and credentials of config.Config (plain for a dev
// server, mTLS with TEMPORAL_TLS_CERT/KEY, or TEMPORAL_API_KEY over TLS for
// Temporal Cloud), with the SDK's logs sent to weft's JSON slog logger.
package temporalclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/weftworks/weft/config"
)

// Options builds the client options for cfg. The API key goes only into the
// credentials, never into a log line or an error.
func Options(cfg config.Config, logger *slog.Logger) (client.Options, error) {
	if logger == nil {
		logger = slog.Default()
	}
	opts := client.Options{
		HostPort:  cfg.TemporalAddress,
		Namespace: cfg.TemporalNamespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(quietCancellations{logger.Handler()}).With("component", "temporal-sdk")),
		// Payloads as the SDK's default converter writes them (converter.go).
		DataConverter: DataConverter(),
	}
	if Loopback(cfg.TemporalAddress) {
		// The SDK gzips every request by default. Over loopback (weft dev,
		// a local cluster) that is CPU for nothing: measured, ~11% of the
		// worker process's CPU in `make bench`.
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	useMTLS := cfg.TemporalTLSCert != "" || cfg.TemporalTLSKey != ""
	switch {
	case useMTLS && cfg.TemporalAPIKey != "":
		return client.Options{}, errors.New("temporalclient: set either TEMPORAL_TLS_CERT/TEMPORAL_TLS_KEY or TEMPORAL_API_KEY, not both")
	case useMTLS:
		if cfg.TemporalTLSCert == "" || cfg.TemporalTLSKey == "" {
			return client.Options{}, errors.New("temporalclient: TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY must be set together")
		}
		cert, err := tls.LoadX509KeyPair(cfg.TemporalTLSCert, cfg.TemporalTLSKey)
		if err != nil {
			return client.Options{}, fmt.Errorf("temporalclient: load TLS key pair: %w", err)
		}
		opts.Credentials = client.NewMTLSCredentials(cert)
		opts.ConnectionOptions.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	case cfg.TemporalAPIKey != "":
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.TemporalAPIKey)
		opts.ConnectionOptions.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return opts, nil
}

// Dial connects to Temporal (the SDK checks the server answers) and logs
// where it connected and how it authenticated, never with what. The SDK
// records its worker and client metrics on metrics (metrics.Metrics'
// Temporal handler, so /metrics serves them); nil records none.
func Dial(ctx context.Context, cfg config.Config, logger *slog.Logger, metrics client.MetricsHandler) (client.Client, error) {
	if logger == nil {
		logger = slog.Default()
	}
	opts, err := Options(cfg, logger)
	if err != nil {
		return nil, err
	}
	opts.MetricsHandler = metrics
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("temporalclient: dial %s (namespace %s): %w", cfg.TemporalAddress, cfg.TemporalNamespace, err)
	}
	logger.Info("connected to temporal", "address", cfg.TemporalAddress, "namespace", cfg.TemporalNamespace, "auth", authKind(cfg))
	return c, nil
}

// Loopback reports whether a host:port names this machine.
func Loopback(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func authKind(cfg config.Config) string {
	switch {
	case cfg.TemporalTLSCert != "":
		return "mtls"
	case cfg.TemporalAPIKey != "":
		return "api-key"
	default:
		return "none"
	}
}
