package api_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
)

// TestNewRequiresItsDependencies: api.New defaults none of the wiring the
// app builds once; a missing dependency is an error naming it.
func TestNewRequiresItsDependencies(t *testing.T) {
	st := testinfra.NewStore(t)
	keys := testinfra.Keys(t, "server-test-secret-0123456789abcd")
	w, err := inproc.Wire(st)
	require.NoError(t, err)
	full := api.Deps{Store: st, Keys: keys, Publication: w.Publication, Variables: w.Variables, Streams: api.NewStreams(nil, 0)}
	_, err = api.New(full)
	require.NoError(t, err, "New with every required dependency")
	for missing, drop := range map[string]func(*api.Deps){
		"Store":       func(d *api.Deps) { d.Store = nil },
		"Keys":        func(d *api.Deps) { d.Keys = nil },
		"Publication": func(d *api.Deps) { d.Publication = nil },
		"Variables":   func(d *api.Deps) { d.Variables = nil },
		"Streams":     func(d *api.Deps) { d.Streams = nil },
	} {
		d := full
		drop(&d)
		_, err = api.New(d)
		assert.False(t, err == nil || !strings.Contains(err.Error(), missing), "New without %s = %v, want an error naming it", missing, err)
	}
}
