package graph

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// approvalJSON waits for a decision on the input, then writes a note when
// approved; rejected and timedOut are left unconnected (dead paths).
const approvalJSON = `{
  "schemaVersion": 1,
  "schemas": {"Item": {"type": "object"}},
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "Item"}},
    {"id": "ok", "kind": "approval", "inputs": {"in": "Item"},
     "outputs": {"approved": "Item", "rejected": "any", "timedOut": "Item"}, "timeoutMs": 3600000},
    {"id": "echo", "kind": "action", "inputs": {"in": "Item"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "ok.in"}, {"from": "ok.approved", "to": "echo.in"}, {"from": "echo.out", "to": "out.in"}]
}`

func approvalDoc(t *testing.T) *Document {
	t.Helper()
	d, err := Decode([]byte(approvalJSON))
	require.NoError(t, err)
	return d
}

func TestApprovalNodeCompiles(t *testing.T) {
	c, issues := Compile(approvalDoc(t), testCatalog())
	require.Empty(t, issues)
	require.Equal(t, []string{"in", "ok", "echo", "out"}, c.Order)
	plan := c.Plan()
	ok := plan.Nodes[1]
	require.Equal(t, KindApproval, ok.Kind)
	require.Equal(t, 3600000, ok.TimeoutMs, "the wait, not a node timeout default")
	require.Equal(t, "ok · approval", ok.Summary)
	var ports []string
	for _, o := range ok.Outputs {
		ports = append(ports, o.Port)
	}
	require.Equal(t, []string{PortApproved, PortRejected, PortTimedOut}, ports)
	require.Empty(t, ok.Outputs[1].To, "an unconnected outcome is a dead path, not an issue")
	require.Equal(t, []string{}, c.Permissions, "an approval needs no permission of the run")
}

func TestApprovalNodeIssues(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(n *Node)
		code   string
		path   string
	}{
		{"no timeout", func(n *Node) { n.TimeoutMs = 0 }, CodeInvalidNode, "/nodes/1/timeoutMs"},
		{"timeout too short", func(n *Node) { n.TimeoutMs = 999 }, CodeLimitExceeded, "/nodes/1/timeoutMs"},
		{"timeout over 30 days", func(n *Node) { n.TimeoutMs = 30*24*3_600_000 + 1 }, CodeLimitExceeded, "/nodes/1/timeoutMs"},
		{"retry", func(n *Node) { n.Retry = &Retry{MaxAttempts: 2} }, CodeInvalidNode, "/nodes/1/retry"},
		{"mapping", func(n *Node) { n.Mapping = map[string]Mapping{"x": {Literal: json.RawMessage(`1`)}} }, CodeInvalidMapping, "/nodes/1/mapping"},
		{"missing port", func(n *Node) { delete(n.Outputs, PortTimedOut) }, CodeInvalidNode, "/nodes/1/outputs"},
		{"unknown port", func(n *Node) { n.Outputs["maybe"] = "any" }, CodeInvalidNode, "/nodes/1/outputs/maybe"},
		{"two inputs", func(n *Node) { n.Inputs["more"] = "any" }, CodeInvalidNode, "/nodes/1/inputs"},
		{"port claims another schema", func(n *Node) {
			n.Inputs["in"] = "any"
		}, CodeIncompatiblePort, "/nodes/1/outputs/approved"},
		{"action field", func(n *Node) { n.Action = &ActionRef{ID: "core.echo", Version: 1} }, CodeInvalidNode, "/nodes/1/action"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := approvalDoc(t)
			c.mutate(&d.Nodes[1])
			require.Contains(t, issueKeys(Validate(d, testCatalog())), c.code+" "+c.path)
		})
	}
	// The bounds themselves are valid.
	for _, ms := range []int{DefaultLimits.MinApprovalTimeoutMs, DefaultLimits.MaxApprovalTimeoutMs} {
		d := approvalDoc(t)
		d.Nodes[1].TimeoutMs = ms
		require.Empty(t, Validate(d, testCatalog()), "timeoutMs %d", ms)
	}
}

func TestApprovalInDryRunAndHistory(t *testing.T) {
	res := DryRun(approvalDoc(t), testCatalog())
	require.True(t, res.Valid, "%v", res.Issues)
	require.Equal(t, 1_000, res.Limits.MinApprovalTimeoutMs)
	require.Equal(t, 2_592_000_000, res.Limits.MaxApprovalTimeoutMs)
	// 16 + echo's 7 + in and out 1 each + one wait for a decision.
	require.Equal(t, 16+7+2+historyApprovalWait, res.EstimatedHistoryEvents)
	require.Equal(t, 2, res.History.MaxPendingActivities)
}

func TestToolsetApprovalPolicies(t *testing.T) {
	doc := exampleDoc(t)
	n := agentNode("agent")
	n.Tools = "ops"
	doc.Nodes = append(doc.Nodes, n)
	doc.Edges = append(doc.Edges, Edge{From: "check.fail", To: "agent.in"})
	ops := Toolset{Tools: []string{"core.echo@1", "workspace.notes.write@1"}, Skill: "Use them.", Summary: "Notes.",
		Approval: map[string]string{"workspace.notes.write@1": ApprovalRequired}}
	doc.Toolsets = map[string]Toolset{"ops": ops}
	require.Empty(t, Validate(doc, testCatalog()))
	require.True(t, ops.RequiresApproval("workspace.notes.write@1"))
	require.False(t, ops.RequiresApproval("core.echo@1"))
	require.Equal(t, DefaultToolApprovalTimeoutMs, ops.ToolApprovalTimeoutMs())
	var none *Toolset
	require.False(t, none.RequiresApproval("core.echo@1"))

	// An agent node that may ask for approvals counts every call's wait.
	withPolicy := EstimateHistoryEvents(*doc)
	doc.Toolsets["ops"] = Toolset{Tools: ops.Tools, Skill: ops.Skill, Summary: ops.Summary}
	require.Equal(t, MaxToolCallsPerNode*(historyApprovalWait+historyActivityAttempt), withPolicy-EstimateHistoryEvents(*doc))

	bad := ops
	bad.Approval = map[string]string{"core.sleep@1": ApprovalRequired, "core.echo@1": "maybe"}
	bad.ApprovalTimeoutMs = 500
	doc.Toolsets = map[string]Toolset{"ops": bad}
	got := map[string]string{}
	for _, is := range ToolsetIssues(doc, testCatalog()) {
		got[is.Path] = is.Code
	}
	require.Equal(t, map[string]string{
		"/toolsets/ops/approval/core.sleep@1": CodeInvalidApprovalPolicy,
		"/toolsets/ops/approval/core.echo@1":  CodeInvalidApprovalPolicy,
		"/toolsets/ops/approvalTimeoutMs":     CodeLimitExceeded,
	}, got)
}

func TestApprovalPoliciesAreAdditiveToTheChecksum(t *testing.T) {
	doc := exampleDoc(t)
	doc.Toolsets = map[string]Toolset{"ops": {Tools: []string{"core.echo@1"}, Skill: "s", Summary: "x"}}
	before, issues := Compile(doc, testCatalog())
	require.Empty(t, issues)
	raw, err := json.Marshal(before.Document.Toolsets["ops"])
	require.NoError(t, err)
	require.JSONEq(t, `{"tools":["core.echo@1"],"skill":"s","summary":"x"}`, string(raw), "no policy, no new keys")

	doc.Toolsets["ops"] = Toolset{Tools: []string{"core.echo@1"}, Skill: "s", Summary: "x",
		Approval: map[string]string{"core.echo@1": ApprovalRequired}}
	after, issues := Compile(doc, testCatalog())
	require.Empty(t, issues)
	require.NotEqual(t, before.Checksum, after.Checksum, "a policy is content")
}
