package starter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// compileDraft compiles draft revision n of workflow key (SPEC §4: a
// simulation may run a valid draft) against the same dependency snapshot
// publication uses, and stores it unpublished under (tenant, checksum), so
// the interpreter and the activities load it exactly like a published
// revision. A draft with issues is refused like a publication: 422
// INVALID_GRAPH with details.issues, a template reading a variable outside
// the caller's scopes included (as publication by that caller would refuse
// it). Storing is idempotent (the checksum covers the content), so
// enqueueing the same draft again is harmless.
func (s *Starter) compileDraft(ctx context.Context, tenant string, scopes []string, key string, n int) (*graph.Compiled, error) {
	d, err := s.store.GetDraft(ctx, tenant, key, n)
	if errors.Is(err, failure.ErrNotFound) {
		return nil, failure.New(failure.CodeNotFound, "workflow %q has no draft revision %d", key, n)
	}
	if err != nil {
		return nil, fmt.Errorf("starter: load draft: %w", err)
	}
	doc, issues := graph.DecodeStored(d.Document)
	var compiled *graph.Compiled
	if issues == nil {
		// New always sets a resolver: the one publication uses.
		if compiled, issues, err = s.resolver.ForScopes(scopes).Compile(ctx, tenant, doc); err != nil {
			return nil, fmt.Errorf("starter: resolve dependencies: %w", err)
		}
	}
	if len(issues) > 0 || compiled == nil {
		return nil, failure.New(failure.CodeInvalidGraph, "draft revision %d has %d issue(s); see details.issues", n, len(issues)).
			WithDetails(map[string]any{"issues": issues, "draftRevision": n})
	}
	plan := compiled.Plan()
	if err := s.store.PutCompiled(ctx, tenant, compiled, &plan); err != nil {
		return nil, fmt.Errorf("starter: store compiled draft: %w", err)
	}
	return compiled, nil
}

// CompileDraft compiles and stores draft revision n of workflow key as a
// simulation of it would (see compileDraft): the replay engine refuses an
// invalid draft up front with the same answer (404, 422 INVALID_GRAPH with
// details.issues) and derives fixtures from the compiled document.
func (s *Starter) CompileDraft(ctx context.Context, tenant string, scopes []string, key string, n int) (*graph.Compiled, error) {
	return s.compileDraft(ctx, tenant, scopes, key, n)
}

// fixtureLimit bounds a request's fixtures: fixtures.MaxBytes, or
// fixtures.MaxRecordedBytes for fixtures weft derived from a recording.
func fixtureLimit(req Request) int {
	if req.DerivedFixtures {
		return fixtures.MaxRecordedBytes
	}
	return fixtures.MaxBytes
}

// checkFixtures validates simulation fixtures against the revision that
// will run (package fixtures: shape, at most limit bytes, keys naming its
// agent, agent-decision, action and approval nodes) and returns what the
// run row stores: the compact JSON, or nil when there are none. Problems
// are 422 INVALID_FIXTURES with details.errors.
func checkFixtures(c *graph.Compiled, raw json.RawMessage, limit int) (json.RawMessage, error) {
	set, problems := fixtures.ParseWithin(raw, limit)
	if len(problems) == 0 {
		problems = set.Check(c.Document)
	}
	if len(problems) > 0 {
		p := problems[0]
		at := p.Path
		if at == "" {
			at = "/"
		}
		return nil, failure.New(CodeInvalidFixtures, "fixtures are invalid at %s: %s", at, p.Message).
			WithDetails(map[string]any{"errors": problems})
	}
	if len(set) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, failure.New(CodeInvalidFixtures, "fixtures are not valid JSON")
	}
	return buf.Bytes(), nil
}

// sameFixtures compares the fixtures a run was bound with to a repeated
// request's, by canonical JSON (none, null and {} are the same).
func sameFixtures(bound, requested json.RawMessage) bool {
	canon := func(raw json.RawMessage) string {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || string(raw) == "null" {
			return "{}"
		}
		c, err := graph.Canonical(raw)
		if err != nil {
			return string(raw)
		}
		return string(c)
	}
	return canon(bound) == canon(requested)
}

// runSummary is the run's Temporal UI summary: Summary for a published
// revision, "<key> draft <n> · simulation" for a simulated draft.
func runSummary(run store.Run) string {
	if run.DraftRevision != nil {
		return run.WorkflowKey + " draft " + strconv.Itoa(*run.DraftRevision) + " · " + run.Mode
	}
	return Summary(run.WorkflowKey, run.Revision, execution.Mode(run.Mode))
}
