package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// registerSkillRoutes adds the tenant skill routes (issue 20): guidance
// texts with immutable numbered revisions, listed by agent revisions and
// appended to their instructions. They share the agents' scopes.
func (s *Server) registerSkillRoutes(g *echo.Group) {
	read := requireScope(auth.ScopeAgentsRead)
	write := requireScope(auth.ScopeAgentsWrite)
	g.GET("/skills", s.listSkills, read)
	g.POST("/skills", s.createSkill, write)
	g.GET("/skills/:key", s.getSkill, read)
	g.POST("/skills/:key/revisions", s.addSkillRevision, write)
	g.GET("/skills/:key/revisions/:n", s.getSkillRevision, read)
	g.POST("/skills/:key/archive", s.archiveSkill, write)
}

// maxSkillRequestBytes bounds a skill request body: the text at its limit
// even if every character were escaped, and the envelope.
const maxSkillRequestBytes = 6*agents.MaxSkillTextBytes + requestHeadroom

func skillPathKey(c echo.Context) (string, error) {
	key := c.Param("key")
	return key, checkKey("skill", key)
}

// skillSummary is one skill in a list.
type skillSummary struct {
	Key            string     `json:"key"`
	Name           string     `json:"name"`
	LatestRevision int        `json:"latestRevision"`
	Archived       bool       `json:"archived"`
	ArchivedAt     *time.Time `json:"archivedAt"`
	CreatedBy      string     `json:"createdBy"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

func summarizeSkill(sk store.Skill) skillSummary {
	return skillSummary{Key: sk.Key, Name: sk.Name, LatestRevision: sk.LatestRevision, Archived: sk.Archived(),
		ArchivedAt: sk.ArchivedAt, CreatedBy: sk.CreatedBy, CreatedAt: sk.CreatedAt, UpdatedAt: sk.UpdatedAt}
}

// skillRevisionBody is one immutable revision with its text.
type skillRevisionBody struct {
	Key       string    `json:"key"`
	Revision  int       `json:"revision"`
	Name      string    `json:"name"`
	Text      string    `json:"text"`
	Hash      string    `json:"hash"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
}

func skillRevisionView(r store.SkillRevision) skillRevisionBody {
	return skillRevisionBody{Key: r.Key, Revision: r.Revision, Name: r.Name, Text: r.Text, Hash: r.Hash,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}
}

// skillRevisionRef is a revision in a skill's history.
type skillRevisionRef struct {
	Revision  int       `json:"revision"`
	Name      string    `json:"name"`
	Hash      string    `json:"hash"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
}

// skillDetail answers GET /v1/skills/{key}, creation and new revisions.
type skillDetail struct {
	skillSummary
	Revision  skillRevisionBody  `json:"revision"`
	Revisions []skillRevisionRef `json:"revisions"`
}

func (s *Server) skillDetail(c echo.Context, tenant string, sk store.Skill, rev store.SkillRevision) (skillDetail, error) {
	history, err := s.deps.Store.ListSkillRevisions(c.Request().Context(), tenant, sk.Key)
	if err != nil {
		return skillDetail{}, err
	}
	refs := make([]skillRevisionRef, 0, len(history))
	for _, h := range history {
		refs = append(refs, skillRevisionRef{Revision: h.Revision, Name: h.Name, Hash: h.Hash, CreatedBy: h.CreatedBy, CreatedAt: h.CreatedAt})
	}
	return skillDetail{skillSummary: summarizeSkill(sk), Revision: skillRevisionView(rev), Revisions: refs}, nil
}

// skillContent normalizes and validates a skill revision and returns it
// with its content hash. Problems are 422 INVALID_SKILL with every issue
// in details.issues.
func skillContent(name, text string) (agents.Skill, string, error) {
	sk := agents.Skill{Name: name, Text: text}.Normalize()
	if issues := agents.ValidateSkill(sk, ""); len(issues) > 0 {
		return agents.Skill{}, "", failure.New(agents.CodeInvalidSkill, "the skill has %d issue(s); see details.issues", len(issues)).
			WithDetails(map[string]any{"issues": issues})
	}
	hash, err := sk.Hash()
	if err != nil {
		return agents.Skill{}, "", err
	}
	return sk, hash, nil
}

// createSkillBody is the body of POST /v1/skills.
type createSkillBody struct {
	Key  string `json:"key" required:"true"`
	Name string `json:"name" required:"true"`
	Text string `json:"text" required:"true"`
}

// addSkillRevisionBody is the body of POST /v1/skills/{key}/revisions: an
// absent (or null) name keeps the latest revision's.
type addSkillRevisionBody struct {
	ExpectedRevision *int    `json:"expectedRevision"`
	Name             *string `json:"name"`
	Text             string  `json:"text" required:"true"`
}

// createSkill handles POST /v1/skills {key, name, text}: the skill and its
// revision 1 (201).
func (s *Server) createSkill(c echo.Context) error {
	p := principal(c)
	var body createSkillBody
	if err := decodeBody(c, maxSkillRequestBytes, &body); err != nil {
		return err
	}
	key := body.Key
	if err := checkKey("skill", key); err != nil {
		return err
	}
	sk, hash, err := skillContent(body.Name, body.Text)
	if err != nil {
		return err
	}
	row, rev, err := s.deps.Store.CreateSkill(c.Request().Context(), p.Tenant, store.NewSkill{
		Key: key, Name: sk.Name, Text: sk.Text, Hash: hash, By: p.Sub})
	if err != nil {
		return err
	}
	out, err := s.skillDetail(c, p.Tenant, row, rev)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/skills/"+row.Key)
	return c.JSON(http.StatusCreated, out)
}

// addSkillRevision handles POST /v1/skills/{key}/revisions
// {expectedRevision?, name?, text}: the next immutable revision (201); name
// defaults to the latest revision's. Published workflows keep the revision
// their agents pinned. A stale expectedRevision is 409 REVISION_CONFLICT,
// an archived skill 409 SKILL_ARCHIVED.
func (s *Server) addSkillRevision(c echo.Context) error {
	p := principal(c)
	key, err := skillPathKey(c)
	if err != nil {
		return err
	}
	var body addSkillRevisionBody
	if err := decodeBody(c, maxSkillRequestBytes, &body); err != nil {
		return err
	}
	var expected int
	if body.ExpectedRevision != nil {
		if err := checkRevisionNumber("expectedRevision", *body.ExpectedRevision); err != nil {
			return err
		}
		expected = *body.ExpectedRevision
	}
	ctx := c.Request().Context()
	var name string
	if body.Name != nil {
		name = *body.Name
	} else {
		cur, err := s.deps.Store.GetSkill(ctx, p.Tenant, key)
		if err != nil {
			return notFoundAs(err, "skill %q not found", key)
		}
		name = cur.Name
	}
	sk, hash, err := skillContent(name, body.Text)
	if err != nil {
		return err
	}
	row, rev, err := s.deps.Store.AddSkillRevision(ctx, p.Tenant, key, store.SkillUpdate{
		ExpectedRevision: expected, Name: sk.Name, Text: sk.Text, Hash: hash, By: p.Sub})
	if err != nil {
		return notFoundAs(err, "skill %q not found", key)
	}
	out, err := s.skillDetail(c, p.Tenant, row, rev)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, fmt.Sprintf("/v1/skills/%s/revisions/%d", key, rev.Revision))
	return c.JSON(http.StatusCreated, out)
}

// getSkill handles GET /v1/skills/{key}: the skill, its latest revision in
// full and its revision history. Another tenant's skill is 404.
func (s *Server) getSkill(c echo.Context) error {
	p := principal(c)
	key, err := skillPathKey(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	sk, err := s.deps.Store.GetSkill(ctx, p.Tenant, key)
	if err != nil {
		return notFoundAs(err, "skill %q not found", key)
	}
	rev, err := s.deps.Store.GetSkillRevision(ctx, p.Tenant, key, sk.LatestRevision)
	if err != nil {
		return err // the skill row names it; missing is a fault
	}
	out, err := s.skillDetail(c, p.Tenant, sk, rev)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// getSkillRevision handles GET /v1/skills/{key}/revisions/{n}.
func (s *Server) getSkillRevision(c echo.Context) error {
	p := principal(c)
	key, err := skillPathKey(c)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 1 {
		return failure.New(failure.CodeInvalidRequest, "revision must be a positive integer").
			WithDetails(map[string]any{"field": "n"})
	}
	rev, err := s.deps.Store.GetSkillRevision(c.Request().Context(), p.Tenant, key, n)
	if err != nil {
		return notFoundAs(err, "revision %d of skill %q not found", n, key)
	}
	return c.JSON(http.StatusOK, skillRevisionView(rev))
}

// archiveSkill handles POST /v1/skills/{key}/archive: new publications no
// longer resolve the skill (MISSING_DEPENDENCY), nor do new agent
// revisions; published revisions keep appending it. Archiving twice is
// harmless (200 both times).
func (s *Server) archiveSkill(c echo.Context) error {
	p := principal(c)
	key, err := skillPathKey(c)
	if err != nil {
		return err
	}
	if _, err := readBody(c, requestHeadroom); err != nil {
		return err
	}
	sk, err := s.deps.Store.ArchiveSkill(c.Request().Context(), p.Tenant, key, p.Sub)
	if err != nil {
		return notFoundAs(err, "skill %q not found", key)
	}
	return c.JSON(http.StatusOK, summarizeSkill(sk))
}

// listSkills handles GET /v1/skills?cursor=&limit=: the tenant's skills in
// key order, archived ones included (flagged).
func (s *Server) listSkills(c echo.Context) error {
	p := principal(c)
	limit, err := pageLimit(c, defaultAgentPage, maxAgentPage)
	if err != nil {
		return err
	}
	scope := cursorScope("skills", p.Tenant)
	after := ""
	if v := c.QueryParam("cursor"); v != "" {
		k, err := s.openCursor(scope, v)
		if err != nil {
			return err
		}
		after = string(k)
	}
	items, next, err := s.deps.Store.ListSkills(c.Request().Context(), p.Tenant, after, limit)
	if err != nil {
		return err
	}
	out := make([]skillSummary, 0, len(items))
	for _, sk := range items {
		out = append(out, summarizeSkill(sk))
	}
	cursor := ""
	if next != "" {
		cursor = s.sealCursor(scope, []byte(next))
	}
	return list(c, "skills", out, cursor)
}

// skillLookup returns the ValidateOptions.Skill of an agent definition: the
// tenant's skill revisions it lists, loaded in one query.
func (s *Server) skillLookup(c echo.Context, tenant string, refs []agents.SkillRef) (func(agents.SkillRef) (graph.SkillContract, bool), error) {
	if len(refs) == 0 || s.deps.Store == nil {
		return nil, nil
	}
	found, err := s.deps.Store.SkillContracts(c.Request().Context(), tenant, refs)
	if err != nil {
		return nil, err
	}
	byRef := make(map[agents.SkillRef]graph.SkillContract, len(found))
	for _, f := range found {
		byRef[agents.SkillRef{Key: f.Key, Revision: f.Revision}] = f
	}
	return func(r agents.SkillRef) (graph.SkillContract, bool) {
		f, ok := byRef[agents.SkillRef{Key: strings.TrimSpace(r.Key), Revision: r.Revision}]
		return f, ok
	}, nil
}
