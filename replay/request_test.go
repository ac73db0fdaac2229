package replay

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
)

func TestRequestCheck(t *testing.T) {
	e := &Engine{maxRuns: 5}
	n := func(v int) *int { return &v }
	cases := []struct {
		name  string
		req   Request
		code  string
		field string
		last  int // the defaulted last, when accepted
	}{
		{name: "defaults last to min(20, max)", req: Request{DraftRevision: 1}, last: 5},
		{name: "last", req: Request{DraftRevision: 1, Last: n(3), Status: []string{"failed"}}, last: 3},
		{name: "runs", req: Request{DraftRevision: 1, Runs: []string{"a", "b"}}},
		{name: "no draft", req: Request{}, code: failure.CodeInvalidRequest, field: "draftRevision"},
		{name: "runs and last", req: Request{DraftRevision: 1, Runs: []string{"a"}, Last: n(1)}, code: failure.CodeInvalidRequest, field: "last"},
		{name: "runs and status", req: Request{DraftRevision: 1, Runs: []string{"a"}, Status: []string{"failed"}}, code: failure.CodeInvalidRequest, field: "status"},
		{name: "status not terminal", req: Request{DraftRevision: 1, Status: []string{"running"}}, code: failure.CodeInvalidRequest, field: "status"},
		{name: "last zero", req: Request{DraftRevision: 1, Last: n(0)}, code: failure.CodeInvalidRequest, field: "last"},
		{name: "last over max", req: Request{DraftRevision: 1, Last: n(6)}, code: CodeTooManyRuns},
		{name: "runs over max", req: Request{DraftRevision: 1, Runs: []string{"a", "b", "c", "d", "e", "f"}}, code: CodeTooManyRuns},
		{name: "duplicate runs", req: Request{DraftRevision: 1, Runs: []string{"a", "a"}}, code: failure.CodeInvalidRequest, field: "runs"},
		{name: "empty run id", req: Request{DraftRevision: 1, Runs: []string{""}}, code: failure.CodeInvalidRequest, field: "runs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			err := e.check(&req)
			if tc.code == "" {
				require.NoError(t, err)
				if tc.last > 0 {
					require.NotNil(t, req.Last)
					assert.Equal(t, tc.last, *req.Last)
				}
				return
			}
			var fe *failure.Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.code, fe.Code)
			if tc.field != "" {
				assert.Equal(t, tc.field, fe.Details["field"])
			}
			if tc.code == CodeTooManyRuns {
				assert.Equal(t, 5, fe.Details["limit"])
			}
		})
	}
}
