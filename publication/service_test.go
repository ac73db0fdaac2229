package publication_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

// Production constructors never default a dependency: a missing one is an
// error naming it.
func TestConstructorsRequireTheirDependencies(t *testing.T) {
	t.Parallel()
	vars, err := variables.Builtin(variables.NoAgents{})
	require.NoError(t, err)
	st := &store.Store{}

	_, err = publication.NewResolver(nil, vars)
	require.ErrorContains(t, err, "Store")
	_, err = publication.NewResolver((*store.Store)(nil), vars)
	require.ErrorContains(t, err, "Store")
	_, err = publication.NewResolver(st, nil)
	require.ErrorContains(t, err, "variable registry")
	r, err := publication.NewResolver(st, vars)
	require.NoError(t, err)
	require.NotNil(t, r.Templates)
	require.Same(t, vars, r.Variables)

	_, err = publication.NewService(nil, r)
	require.ErrorContains(t, err, "Drafts")
	_, err = publication.NewService((*store.Store)(nil), r)
	require.ErrorContains(t, err, "Drafts")
	_, err = publication.NewService(st, nil)
	require.ErrorContains(t, err, "Resolver")
	svc, err := publication.NewService(st, r)
	require.NoError(t, err)
	require.Same(t, r, svc.Resolver())
}
