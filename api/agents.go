package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// registerAgentRoutes adds the agent routes (SPEC §7, §10): agents with
// immutable numbered revisions, archiving, and the action catalog.
func (s *Server) registerAgentRoutes(g *echo.Group) {
	read := requireScope(auth.ScopeAgentsRead)
	write := requireScope(auth.ScopeAgentsWrite)
	g.GET("/agents", s.listAgents, read)
	g.POST("/agents", s.createAgent, write)
	g.GET("/agents/:key", s.getAgent, read)
	g.POST("/agents/:key/revisions", s.addAgentRevision, write)
	g.GET("/agents/:key/revisions/:n", s.getAgentRevision, read)
	g.POST("/agents/:key/archive", s.archiveAgent, write)
	g.GET("/actions", s.listActions, requireScope(auth.ScopeWorkflowsRead))
}

// Limits of agent metadata.
const (
	maxAgentNameChars        = 200
	maxAgentDescriptionChars = 2000
	// maxAgentRequestBytes bounds an agent request body.
	maxAgentRequestBytes = agents.MaxDefinitionBytes + requestHeadroom
)

// checkAgentKey refuses a malformed agent key (the workflow key syntax).
func checkAgentKey(key string) error { return checkKey("agent", key) }

func agentPathKey(c echo.Context) (string, error) {
	key := c.Param("key")
	return key, checkAgentKey(key)
}

// checkText refuses a name or description that is too long or holds control characters.
func checkText(field, v string, required bool, limit int) error {
	bad := func(format string, args ...any) error {
		return failure.New(failure.CodeInvalidRequest, "field %q "+format, append([]any{field}, args...)...).
			WithDetails(map[string]any{"field": field})
	}
	switch {
	case required && strings.TrimSpace(v) == "":
		return bad("is required")
	case utf8.RuneCountInString(v) > limit:
		return bad("has more than %d characters", limit)
	case strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) >= 0:
		return bad("must not contain control characters")
	}
	return nil
}

// agentSummary is one agent in a list.
type agentSummary struct {
	Key            string     `json:"key"`
	Name           string     `json:"name"`
	Description    string     `json:"description"`
	LatestRevision int        `json:"latestRevision"`
	Archived       bool       `json:"archived"`
	ArchivedAt     *time.Time `json:"archivedAt"`
	CreatedBy      string     `json:"createdBy"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

func summarizeAgent(a store.Agent) agentSummary {
	return agentSummary{Key: a.Key, Name: a.Name, Description: a.Description, LatestRevision: a.LatestRevision,
		Archived: a.Archived(), ArchivedAt: a.ArchivedAt, CreatedBy: a.CreatedBy, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
}

// agentRevisionBody is one revision with its definition (instructions raw,
// as authored: they are resolved only when the agent runs).
type agentRevisionBody struct {
	Key        string          `json:"key"`
	Revision   int             `json:"revision"`
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition"`
	CreatedBy  string          `json:"createdBy"`
	CreatedAt  time.Time       `json:"createdAt"`
}

func revisionBody(r store.AgentRevision) agentRevisionBody {
	return agentRevisionBody{Key: r.Key, Revision: r.Revision, Hash: r.Hash, Definition: r.Content,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}
}

// agentRevisionRef is a revision in an agent's history.
type agentRevisionRef struct {
	Revision  int       `json:"revision"`
	Hash      string    `json:"hash"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
}

// agentDetail answers GET /v1/agents/{key}, creation and new revisions:
// the agent, one revision in full (the latest, or the one just created) and
// the revision history.
type agentDetail struct {
	agentSummary
	Revision  agentRevisionBody  `json:"revision"`
	Revisions []agentRevisionRef `json:"revisions"`
}

func (s *Server) agentDetail(c echo.Context, tenant string, a store.Agent, rev store.AgentRevision) (agentDetail, error) {
	history, err := s.deps.Store.ListAgentRevisions(c.Request().Context(), tenant, a.Key)
	if err != nil {
		return agentDetail{}, err
	}
	refs := make([]agentRevisionRef, 0, len(history))
	for _, h := range history {
		refs = append(refs, agentRevisionRef{Revision: h.Revision, Hash: h.Hash, CreatedBy: h.CreatedBy, CreatedAt: h.CreatedAt})
	}
	return agentDetail{agentSummary: summarizeAgent(a), Revision: revisionBody(rev), Revisions: refs}, nil
}

// definitionContent decodes, normalizes and validates a definition and
// returns what is stored: its JSON and content hash. Malformed JSON or
// unknown fields are 400 INVALID_REQUEST; a definition with issues is 422
// INVALID_AGENT listing every issue in details.issues, among them every
// allowed tool that is malformed (INVALID_TOOL), neither built-in nor
// published (MISSING_DEPENDENCY) or external/destructive
// (UNSUPPORTED_ACTION_RISK), and every listed skill revision that the
// tenant does not hold or archived (MISSING_DEPENDENCY): what publication
// would refuse is refused when the agent is authored.
func (s *Server) definitionContent(c echo.Context, raw json.RawMessage) (json.RawMessage, string, error) {
	def, err := agents.DecodeDefinition(raw)
	if err != nil {
		return nil, "", failure.New(failure.CodeInvalidRequest, "field \"definition\": %v", err).
			WithDetails(map[string]any{"field": "definition"})
	}
	def = def.Normalize()
	// Tools are checked against the snapshot publication resolves them in
	// (built-in and published action contracts; no document, so no agents).
	cat, err := s.publication.Catalog(c.Request().Context(), principal(c).Tenant, nil)
	if err != nil {
		return nil, "", err
	}
	skill, err := s.skillLookup(c, principal(c).Tenant, def.Skills)
	if err != nil {
		return nil, "", err
	}
	issues := agents.Validate(def, "/definition", agents.ValidateOptions{
		Variables: s.variables().Definitions(),
		Action: func(ref graph.ActionRef) (graph.ActionContract, bool) {
			return cat.Action(ref.ID, ref.Version)
		},
		Skill: skill,
	})
	if len(issues) > 0 {
		return nil, "", failure.New(agents.CodeInvalidAgent, "the agent definition has %d issue(s); see details.issues", len(issues)).
			WithDetails(map[string]any{"issues": issues})
	}
	content, err := json.Marshal(def)
	if err != nil {
		return nil, "", err
	}
	hash, err := def.Hash()
	if err != nil {
		return nil, "", err
	}
	return content, hash, nil
}

// createAgent handles POST /v1/agents {key, name, description?, definition}:
// the agent and its revision 1 are created together (201).
func (s *Server) createAgent(c echo.Context) error {
	p := principal(c)
	if _, err := graphBodyFormat(c); err != nil {
		return err
	}
	body, err := readRequestBody(c, maxAgentRequestBytes)
	if err != nil {
		return err
	}
	var key, name, description string
	var raw json.RawMessage
	if err := decodeEnvelope(body,
		&envelopeField{Name: "key", Dst: &key, Required: true},
		&envelopeField{Name: "name", Dst: &name, Required: true},
		&envelopeField{Name: "description", Dst: &description},
		&envelopeField{Name: "definition", Dst: &raw, Required: true}); err != nil {
		return err
	}
	if err := checkAgentKey(key); err != nil {
		return err
	}
	if err := checkText("name", name, true, maxAgentNameChars); err != nil {
		return err
	}
	if err := checkText("description", description, false, maxAgentDescriptionChars); err != nil {
		return err
	}
	content, hash, err := s.definitionContent(c, raw)
	if err != nil {
		return err
	}
	a, rev, err := s.deps.Store.CreateAgent(c.Request().Context(), p.Tenant, store.NewAgent{
		Key: key, Name: strings.TrimSpace(name), Description: description, Content: content, Hash: hash, By: p.Sub})
	if err != nil {
		return err
	}
	out, err := s.agentDetail(c, p.Tenant, a, rev)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/agents/"+a.Key)
	return c.JSON(http.StatusCreated, out)
}

// addAgentRevision handles POST /v1/agents/{key}/revisions
// {expectedRevision?, name?, description?, definition}: the next immutable
// revision (201). A stale expectedRevision is 409 REVISION_CONFLICT, an
// archived agent 409 AGENT_ARCHIVED.
func (s *Server) addAgentRevision(c echo.Context) error {
	p := principal(c)
	key, err := agentPathKey(c)
	if err != nil {
		return err
	}
	if _, err := graphBodyFormat(c); err != nil {
		return err
	}
	body, err := readRequestBody(c, maxAgentRequestBytes)
	if err != nil {
		return err
	}
	var expected int
	var name, description string
	var raw json.RawMessage
	ef := &envelopeField{Name: "expectedRevision", Dst: &expected}
	nf := &envelopeField{Name: "name", Dst: &name}
	df := &envelopeField{Name: "description", Dst: &description}
	if err := decodeEnvelope(body, ef, nf, df, &envelopeField{Name: "definition", Dst: &raw, Required: true}); err != nil {
		return err
	}
	if ef.Set {
		if err := checkRevisionNumber("expectedRevision", expected); err != nil {
			return err
		}
	}
	u := store.AgentUpdate{ExpectedRevision: expected, By: p.Sub}
	if nf.Set {
		if err := checkText("name", name, true, maxAgentNameChars); err != nil {
			return err
		}
		trimmed := strings.TrimSpace(name)
		u.Name = &trimmed
	}
	if df.Set {
		if err := checkText("description", description, false, maxAgentDescriptionChars); err != nil {
			return err
		}
		u.Description = &description
	}
	if u.Content, u.Hash, err = s.definitionContent(c, raw); err != nil {
		return err
	}
	a, rev, err := s.deps.Store.AddAgentRevision(c.Request().Context(), p.Tenant, key, u)
	if err != nil {
		return notFoundAs(err, "agent %q not found", key)
	}
	out, err := s.agentDetail(c, p.Tenant, a, rev)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, fmt.Sprintf("/v1/agents/%s/revisions/%d", key, rev.Revision))
	return c.JSON(http.StatusCreated, out)
}

// getAgent handles GET /v1/agents/{key}: the agent, its latest revision in
// full and its revision history. Another tenant's agent is 404.
func (s *Server) getAgent(c echo.Context) error {
	p := principal(c)
	key, err := agentPathKey(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	a, err := s.deps.Store.GetAgent(ctx, p.Tenant, key)
	if err != nil {
		return notFoundAs(err, "agent %q not found", key)
	}
	rev, err := s.deps.Store.GetAgentRevision(ctx, p.Tenant, key, a.LatestRevision)
	if err != nil {
		return err // the agent row names it; missing is a fault
	}
	out, err := s.agentDetail(c, p.Tenant, a, rev)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// getAgentRevision handles GET /v1/agents/{key}/revisions/{n}: one
// immutable revision (archived agents' revisions included).
func (s *Server) getAgentRevision(c echo.Context) error {
	p := principal(c)
	key, err := agentPathKey(c)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 1 {
		return failure.New(failure.CodeInvalidRequest, "revision must be a positive integer").
			WithDetails(map[string]any{"field": "n"})
	}
	rev, err := s.deps.Store.GetAgentRevision(c.Request().Context(), p.Tenant, key, n)
	if err != nil {
		return notFoundAs(err, "revision %d of agent %q not found", n, key)
	}
	return c.JSON(http.StatusOK, revisionBody(rev))
}

// archiveAgent handles POST /v1/agents/{key}/archive: new publications no
// longer resolve the agent (MISSING_DEPENDENCY); published revisions keep
// running. Archiving twice is harmless (200 both times).
func (s *Server) archiveAgent(c echo.Context) error {
	p := principal(c)
	key, err := agentPathKey(c)
	if err != nil {
		return err
	}
	if _, err := readRequestBody(c, requestHeadroom); err != nil {
		return err
	}
	a, err := s.deps.Store.ArchiveAgent(c.Request().Context(), p.Tenant, key, p.Sub)
	if err != nil {
		return notFoundAs(err, "agent %q not found", key)
	}
	return c.JSON(http.StatusOK, summarizeAgent(a))
}

// Agent list paging.
const (
	defaultAgentPage = 50
	maxAgentPage     = 200
)

// listAgents handles GET /v1/agents?cursor=&limit=: the tenant's agents in
// key order, archived ones included (flagged).
func (s *Server) listAgents(c echo.Context) error {
	p := principal(c)
	limit := defaultAgentPage
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAgentPage {
			return failure.New(failure.CodeInvalidRequest, "limit must be an integer from 1 to %d", maxAgentPage).
				WithDetails(map[string]any{"field": "limit"})
		}
		limit = n
	}
	scope := cursorScope("agents", p.Tenant)
	after := ""
	if v := c.QueryParam("cursor"); v != "" {
		k, err := s.openCursor(scope, v)
		if err != nil {
			return err
		}
		after = string(k)
	}
	items, next, err := s.deps.Store.ListAgents(c.Request().Context(), p.Tenant, after, limit)
	if err != nil {
		return err
	}
	out := make([]agentSummary, 0, len(items))
	for _, a := range items {
		out = append(out, summarizeAgent(a))
	}
	cursor := ""
	if next != "" {
		cursor = s.sealCursor(scope, []byte(next))
	}
	return list(c, "agents", out, cursor)
}

// actionBody is one published action contract.
type actionBody struct {
	graph.ActionContract
	// Ref is id@version, the form agents' allowed tools and toolsets use.
	Ref         string    `json:"ref"`
	Hash        string    `json:"hash"`
	PublishedAt time.Time `json:"publishedAt"`
}

// listActions handles GET /v1/actions: every contract workers published to
// the catalog, sorted by id then version, in one page.
func (s *Server) listActions(c echo.Context) error {
	if c.QueryParam("cursor") != "" {
		return failure.New(failure.CodeCursorInvalid, "the action list has one page; it takes no cursor")
	}
	all, err := s.deps.Store.ListActionContracts(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]actionBody, 0, len(all))
	for _, a := range all {
		ct := a.Contract
		if ct.RequiredPermissions == nil {
			ct.RequiredPermissions = []string{}
		}
		out = append(out, actionBody{ActionContract: ct, Ref: graph.ActionRef{ID: ct.ID, Version: ct.Version}.String(),
			Hash: a.Hash, PublishedAt: a.PublishedAt})
	}
	return list(c, "actions", out, "")
}
