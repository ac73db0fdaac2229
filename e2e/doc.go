// Package e2e holds weft's end-to-end tests: the real Temporal dev server
// (bin/temporal, one per test binary), real PostgreSQL, the HTTP API over
// httptest, and workers registering exactly what production registers, in
// process or as a separate process that the SIGKILL drill kills. Graphs are
// published and runs are enqueued, read and cancelled through the API only.
package e2e
