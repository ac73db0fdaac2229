package publication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// Drafts is what the Service reads and writes: workflows, their drafts,
// and published revisions (store.Store implements it).
type Drafts interface {
	GetWorkflow(ctx context.Context, tenantID, key string) (store.Workflow, error)
	GetDraft(ctx context.Context, tenantID, key string, revision int) (store.Draft, error)
	Publish(ctx context.Context, tenantID, key string, draftRevision int, compiled *graph.Compiled, p *graph.Plan, by string) (store.Revision, bool, error)
}

// Service dry-runs and publishes drafts against the tenant's dependency
// snapshot, and answers the checks authoring makes against that snapshot
// (an agent's tools, a draft's toolsets). Every error it returns is coded
// (failure), so an adapter maps it without interpreting it.
type Service struct {
	drafts   Drafts
	resolver *Resolver
}

// NewService returns the publication service over drafts, resolving every
// document with resolver. Both are required.
func NewService(drafts Drafts, resolver *Resolver) (*Service, error) {
	if s, ok := drafts.(*store.Store); drafts == nil || (ok && s == nil) {
		return nil, errors.New("publication: NewService needs the Drafts store")
	}
	if resolver == nil {
		return nil, errors.New("publication: NewService needs a Resolver")
	}
	return &Service{drafts: drafts, resolver: resolver}, nil
}

// Resolver is the resolver the service publishes with, for what must
// compile a draft exactly as publication would (the starter's simulated
// drafts).
func (s *Service) Resolver() *Resolver { return s.resolver }

// notFoundAs turns a missing row (including another tenant's) into
// NOT_FOUND naming what was asked for; other errors pass through (coded
// ones keep their code, anything else stays internal).
func notFoundAs(err error, format string, args ...any) error {
	if errors.Is(err, failure.ErrNotFound) {
		return failure.Wrap(err, failure.CodeNotFound, format, args...)
	}
	return err
}

// Draft returns draft revision (0 = the latest) of workflow key; a missing
// workflow or draft is NOT_FOUND.
func (s *Service) Draft(ctx context.Context, tenant, key string, revision int) (store.Draft, error) {
	if revision == 0 {
		w, err := s.drafts.GetWorkflow(ctx, tenant, key)
		if err != nil {
			return store.Draft{}, notFoundAs(err, "workflow %q not found", key)
		}
		revision = w.LatestDraftRevision
	}
	d, err := s.drafts.GetDraft(ctx, tenant, key, revision)
	if err != nil {
		return store.Draft{}, notFoundAs(err, "draft revision %d of workflow %q not found", revision, key)
	}
	return d, nil
}

// DryRun is the verdict on one draft, and which draft it judged.
type DryRun struct {
	DraftRevision int
	Result        graph.DryRunResult
}

// DryRun validates draft revision (0 = the latest) of key against the
// tenant's dependency snapshot, as a principal holding scopes would
// publish it, and reports everything publication would decide. It stores
// nothing and calls nothing. A stored draft that no longer decodes is a
// verdict (its issues), not an error.
func (s *Service) DryRun(ctx context.Context, tenant string, scopes []string, key string, revision int) (DryRun, error) {
	d, err := s.Draft(ctx, tenant, key, revision)
	if err != nil {
		return DryRun{}, err
	}
	out := DryRun{DraftRevision: d.Revision}
	doc, issues := graph.DecodeStored(d.Document)
	if issues != nil {
		out.Result = graph.DryRunResult{Issues: issues, Warnings: []graph.Issue{}, Order: []string{}, Permissions: []string{},
			References: graph.ReferenceSet{Actions: []graph.ActionRef{}, Agents: []graph.AgentRef{}},
			Limits:     graph.DefaultLimits}
		return out, nil
	}
	if out.Result, err = s.resolver.ForScopes(scopes).DryRun(ctx, tenant, doc); err != nil {
		return DryRun{}, err
	}
	return out, nil
}

// Check is DryRun for a document that is not saved (the canvas editor asks
// it before it draws an edge or saves): what publication would decide for
// doc, as a principal holding scopes would publish it. It stores nothing.
func (s *Service) Check(ctx context.Context, tenant string, scopes []string, doc *graph.Document) (graph.DryRunResult, error) {
	return s.resolver.ForScopes(scopes).DryRun(ctx, tenant, doc)
}

// Request asks to publish a draft.
type Request struct {
	Tenant string
	// Scopes are the publishing principal's: templates may only read
	// variables it could read itself.
	Scopes []string
	// By is who publishes (recorded on the revision).
	By  string
	Key string
	// ExpectedRevision names the draft being published; it must still be
	// the latest.
	ExpectedRevision int
}

// Published is a publication's outcome.
type Published struct {
	Revision store.Revision
	// Created is false when the draft's content was identical to the
	// latest published revision (same checksum): nothing was created and
	// Revision is that one, so a retried publish is harmless.
	Created bool
	// Warnings ask for what a published revision may still lack (a
	// toolset summary: MISSING_TOOLSET_SUMMARY); they never refuse
	// publication.
	Warnings []graph.Issue
}

// Publish validates and compiles draft req.ExpectedRevision of req.Key
// against the tenant's dependency snapshot and stores it as the next
// published revision. The draft must still be the latest
// (REVISION_CONFLICT); any issue refuses it with INVALID_GRAPH listing
// every issue in details.issues; a missing workflow is NOT_FOUND.
func (s *Service) Publish(ctx context.Context, req Request) (Published, error) {
	// Checked here to answer a stale request before compiling; the store's
	// Publish checks again under the row lock, which is what makes it safe.
	w, err := s.drafts.GetWorkflow(ctx, req.Tenant, req.Key)
	if err != nil {
		return Published{}, notFoundAs(err, "workflow %q not found", req.Key)
	}
	if w.LatestDraftRevision != req.ExpectedRevision {
		return Published{}, store.RevisionConflict(req.ExpectedRevision, w.LatestDraftRevision)
	}
	d, err := s.Draft(ctx, req.Tenant, req.Key, req.ExpectedRevision)
	if err != nil {
		return Published{}, err
	}
	doc, issues := graph.DecodeStored(d.Document)
	var compiled *graph.Compiled
	if issues == nil {
		if compiled, issues, err = s.resolver.ForScopes(req.Scopes).Compile(ctx, req.Tenant, doc); err != nil {
			return Published{}, err
		}
	}
	if len(issues) > 0 || compiled == nil {
		return Published{}, failure.New(failure.CodeInvalidGraph, "draft revision %d has %d issue(s); see details.issues", req.ExpectedRevision, len(issues)).
			WithDetails(map[string]any{"issues": issues, "draftRevision": req.ExpectedRevision})
	}
	plan := compiled.Plan()
	rev, created, err := s.drafts.Publish(ctx, req.Tenant, req.Key, req.ExpectedRevision, compiled, &plan, req.By)
	if err != nil {
		return Published{}, notFoundAs(err, "workflow %q not found", req.Key)
	}
	return Published{Revision: rev, Created: created, Warnings: graph.ToolsetWarnings(doc)}, nil
}

// Catalog is the snapshot doc resolves in for tenant (doc may be nil: the
// action contracts only, built-in and published), what an agent's allowed
// tools are checked against when it is authored.
func (s *Service) Catalog(ctx context.Context, tenant string, doc *graph.Document) (graph.Catalog, error) {
	return s.resolver.Catalog(ctx, tenant, doc)
}

// CheckToolsets refuses, when a draft is saved, a document whose toolsets
// cannot be offered (SPEC §9): a tools value that is empty or names no
// toolset in the document (an uncaptured client path: the server never
// reads one), a blank skill, a malformed entry, or an action the tenant's
// catalog does not hold or publication would refuse; a summary that is not
// one line of at most 600 characters (INVALID_TOOLSET_SUMMARY); and a new
// toolset without a summary (MISSING_TOOLSET_SUMMARY): previous is the
// draft being replaced (nil on creation), whose toolsets without a summary
// may stay as they are. doc is nil when the stored JSON does not decode.
// Other graph issues may stay in a draft; toolsets are captured folder
// content and a bad one fails the push rather than being silently dropped.
// The refusal lists every issue in details.issues; its code is
// INVALID_TOOLSET_SUMMARY or MISSING_TOOLSET_SUMMARY when that is every
// issue's code, else INVALID_TOOLS_PATH.
func (s *Service) CheckToolsets(ctx context.Context, tenant string, doc, previous *graph.Document, stored json.RawMessage) error {
	issues := graph.EmptyToolsIssues(stored)
	if doc != nil {
		cat, err := s.resolver.Catalog(ctx, tenant, doc)
		if err != nil {
			return err
		}
		issues = append(issues, graph.ToolsetIssues(doc, cat)...)
		issues = append(issues, graph.RequireToolsetSummaries(doc, previous)...)
	}
	if len(issues) == 0 {
		return nil
	}
	code := graph.CodeInvalidToolsPath
	if c := issues[0].Code; c == graph.CodeInvalidToolsetSummary || c == graph.CodeMissingToolsetSummary {
		code = c
		for _, is := range issues {
			if is.Code != c {
				code = graph.CodeInvalidToolsPath
			}
		}
	}
	msg := fmt.Sprintf("the document's toolsets cannot be used (%d issue(s); see details.issues): a tools value must name a toolset in the document, whose tools are actions in the catalog", len(issues))
	switch code {
	case graph.CodeInvalidToolsetSummary:
		msg = fmt.Sprintf("%d toolset summary(ies) are not one line of at most %d characters; see details.issues", len(issues), graph.DefaultLimits.MaxToolsetSummaryChars)
	case graph.CodeMissingToolsetSummary:
		msg = fmt.Sprintf("%d new toolset(s) have no summary: give each a one-line summary (at most %d characters); see details.issues", len(issues), graph.DefaultLimits.MaxToolsetSummaryChars)
	}
	return failure.New(code, "%s", msg).WithDetails(map[string]any{"issues": issues})
}
