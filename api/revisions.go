package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

type revisionSummary struct {
	Revision      int       `json:"revision"`
	Checksum      string    `json:"checksum"`
	DraftRevision int       `json:"draftRevision"`
	PublishedBy   string    `json:"publishedBy"`
	PublishedAt   time.Time `json:"publishedAt"`
}

func summarizeRevision(r store.Revision) *revisionSummary {
	return &revisionSummary{Revision: r.Revision, Checksum: r.Checksum, DraftRevision: r.DraftRevision,
		PublishedBy: r.PublishedBy, PublishedAt: r.PublishedAt}
}

// revisionDetail answers GET /v1/workflows/{key}/revisions/{n}: the immutable
// revision with everything it pinned.
type revisionDetail struct {
	Key string `json:"key"`
	revisionSummary
	// Graph is the compiled document: nodes in compiled order, edges sorted.
	Graph                  graph.Document      `json:"graph"`
	Order                  []string            `json:"order"`
	Dependencies           pinnedDependencies  `json:"dependencies"`
	Permissions            []string            `json:"permissions"`
	NodePermissions        map[string][]string `json:"nodePermissions"`
	EstimatedHistoryEvents int                 `json:"estimatedHistoryEvents"`
	// Warnings: what the revision lacks but runs without (a toolset
	// summary, MISSING_TOOLSET_SUMMARY).
	Warnings []graph.Issue `json:"warnings"`
}

type pinnedDependencies struct {
	Actions []graph.PinnedAction  `json:"actions"`
	Agents  []graph.AgentContract `json:"agents"`
}

// getWorkflowRevision handles GET /v1/workflows/{key}/revisions/{n}: the
// revision in JSON, or its graph document alone in YAML (wantsYAML).
func (s *Server) getWorkflowRevision(c echo.Context) error {
	p := principal(c)
	ctx := c.Request().Context()
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 1 {
		return failure.New(failure.CodeInvalidRequest, "revision must be a positive integer").
			WithDetails(map[string]any{"field": "n"})
	}
	asYAML, err := wantsYAML(c)
	if err != nil {
		return err
	}
	rev, err := s.deps.Store.GetRevision(ctx, p.Tenant, key, n)
	if err != nil {
		return notFoundAs(err, "revision %d of workflow %q not found", n, key)
	}
	cr, err := s.deps.Store.GetCompiled(ctx, p.Tenant, rev.Checksum)
	if err != nil {
		return err // the revision row pins it by foreign key; missing is a fault
	}
	if asYAML {
		raw, err := json.Marshal(cr.Document)
		if err != nil {
			return err
		}
		return yamlGraph(c, raw, map[string]string{headerRevision: strconv.Itoa(rev.Revision),
			headerChecksum: rev.Checksum, headerDraftRevision: strconv.Itoa(rev.DraftRevision)})
	}
	return c.JSON(http.StatusOK, revisionDetail{
		Key:                    key,
		revisionSummary:        *summarizeRevision(rev),
		Graph:                  cr.Document,
		Order:                  emptyIfNil(cr.Order),
		Dependencies:           pinnedDependencies{Actions: emptyIfNil(cr.Actions), Agents: emptyIfNil(cr.Agents)},
		Permissions:            emptyIfNil(cr.Permissions),
		NodePermissions:        cr.NodePermissions,
		EstimatedHistoryEvents: cr.EstimatedHistoryEvents,
		Warnings:               graph.ToolsetWarnings(&cr.Document),
	})
}

// emptyIfNil makes an absent list encode as [] rather than null.
func emptyIfNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
