package graph

import "fmt"

// resolveAgentTools pins the actions an agent revision allows as tools, so
// their contract hashes are in the checksum and a run calls exactly those
// contracts, and reports (at the agent reference's path) an allowed tool
// that is malformed or missing (MISSING_DEPENDENCY) or that no run may call
// (UNSUPPORTED_ACTION_RISK for external and destructive actions). Tools do
// not add to the node's required permissions: the harness offers a tool
// only when the run's permission snapshot holds its permissions and answers
// any other call with tool.denied.
func (a *analysis) resolveAgentTools(c AgentContract, path string) {
	agent := AgentRef{Key: c.Key, Revision: c.Revision}
	for _, t := range c.AllowedTools {
		ref, err := ParseActionRef(t)
		if err != nil {
			a.add(CodeMissingDependency, path, "agent %s allows tool %q, which is not actionId@version: %v", agent, t, err)
			continue
		}
		first := len(a.issues)
		a.resolveAction(ref, path)
		for i := first; i < len(a.issues); i++ {
			a.issues[i].Message = fmt.Sprintf("agent %s allows tool %s: %s", agent, ref, a.issues[i].Message)
		}
	}
}
