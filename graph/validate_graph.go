package graph

import (
	"maps"
	"slices"
	"strings"
)

// Code choices for wiring problems (SPEC §2 says every input port has exactly
// one incoming edge):
//   - an endpoint that is not "node.port", or names no node: DANGLING_EDGE at
//     /edges/i/from or /edges/i/to;
//   - an endpoint naming a port the node does not declare (an input port used
//     as a source, or the reverse, included): UNKNOWN_PORT at the endpoint;
//   - an input port with no incoming edge: DANGLING_EDGE at
//     /nodes/i/inputs/<port> (the port dangles);
//   - a second edge into an input port: INVALID_NODE at /edges/j/to of each
//     extra edge (the first edge in document order keeps the port);
//   - port schemas that differ when the target is not "any":
//     INCOMPATIBLE_PORT at /edges/i.

func (a *analysis) resolveEdges() {
	a.edges = make([]resolvedEdge, 0, len(a.doc.Edges))
	for i, e := range a.doc.Edges {
		from, fromPort, okFrom := a.resolveEndpoint(i, "from", e.From)
		to, toPort, okTo := a.resolveEndpoint(i, "to", e.To)
		if okTo {
			if a.incoming[portKey{to, toPort}] > 0 {
				a.add(CodeInvalidNode, edgePath(i, "to"), "input port %s already has an incoming edge; every input port takes exactly one", e.To)
			}
			a.incoming[portKey{to, toPort}]++
		}
		if !okFrom || !okTo {
			continue
		}
		fs := a.doc.Nodes[from].Outputs[fromPort]
		ts := a.doc.Nodes[to].Inputs[toPort]
		if ts != AnySchema && fs != ts {
			a.add(CodeIncompatiblePort, edgePath(i), "%s carries schema %q but %s accepts %q", e.From, fs, e.To, ts)
		}
		a.edges = append(a.edges, resolvedEdge{index: i, from: from, to: to, fromPort: fromPort, toPort: toPort})
	}
}

// resolveEndpoint resolves edge i's endpoint (side "from" → an output port,
// "to" → an input port) to a node index and port.
func (a *analysis) resolveEndpoint(i int, side, s string) (int, string, bool) {
	id, port, ok := SplitEndpoint(s)
	if !ok {
		a.add(CodeDanglingEdge, edgePath(i, side), "endpoint %q is not node.port", s)
		return 0, "", false
	}
	idx, ok := a.index[id]
	if !ok {
		a.add(CodeDanglingEdge, edgePath(i, side), "node %q does not exist", id)
		return 0, "", false
	}
	n := a.doc.Nodes[idx]
	ports, what := n.Outputs, "output"
	if side == "to" {
		ports, what = n.Inputs, "input"
	}
	if _, ok := ports[port]; !ok {
		a.add(CodeUnknownPort, edgePath(i, side), "node %q has no %s port %q (%s ports: %s)", id, what, port, what, fmtPorts(ports))
		return 0, "", false
	}
	return idx, port, true
}

// checkWiring reports unconnected input ports and fan-in over the limit.
func (a *analysis) checkWiring() {
	for i, n := range a.doc.Nodes {
		if !a.unique[i] {
			continue
		}
		total := 0
		for _, p := range slices.Sorted(maps.Keys(n.Inputs)) {
			c := a.incoming[portKey{i, p}]
			total += c
			if c == 0 {
				a.add(CodeDanglingEdge, nodePath(i, "inputs", p), "input port %s.%s has no incoming edge", n.ID, p)
			}
		}
		if fan := max(total, len(n.Inputs)); fan > DefaultLimits.MaxFanIn {
			a.add(CodeLimitExceeded, nodePath(i, "inputs"), "fan-in %d exceeds the limit of %d", fan, DefaultLimits.MaxFanIn)
		}
	}
}

// checkGraph checks the graph as a whole: one input node, no cycles, every
// node reachable from the input, and a reachable output. It also computes
// the compile order when the graph is acyclic.
func (a *analysis) checkGraph() {
	nodes := a.doc.Nodes
	succ := make([][]int, len(nodes))
	for _, e := range a.edges {
		succ[e.from] = append(succ[e.from], e.to)
	}

	inputs := []int{}
	for i, n := range nodes {
		if a.unique[i] && n.Kind == KindInput {
			if len(inputs) > 0 {
				a.add(CodeInvalidNode, nodePath(i, "kind"), "only one input node is allowed; /nodes/%d is the input", inputs[0])
				continue
			}
			inputs = append(inputs, i)
		}
	}

	cyclic := a.checkCycles(succ)

	reached := make([]bool, len(nodes))
	queue := slices.Clone(inputs)
	for _, i := range queue {
		reached[i] = true
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, j := range succ[i] {
			if !reached[j] {
				reached[j] = true
				queue = append(queue, j)
			}
		}
	}
	if len(inputs) == 0 {
		a.add(CodeUnreachableNode, "/nodes", "the graph has no input node, so no node is reachable")
	} else {
		for i, n := range nodes {
			if a.unique[i] && !reached[i] && n.Kind != KindInput {
				a.add(CodeUnreachableNode, nodePath(i), "node %q is not reachable from the input node", n.ID)
			}
		}
	}

	outputs, reachedOutput := 0, false
	for i, n := range nodes {
		if a.unique[i] && n.Kind == KindOutput {
			outputs++
			reachedOutput = reachedOutput || reached[i]
		}
	}
	switch {
	case outputs == 0:
		a.add(CodeMissingOutput, "/nodes", "the graph has no output node")
	case !reachedOutput && len(inputs) > 0:
		a.add(CodeMissingOutput, "/nodes", "no output node is reachable from the input node")
	}

	if !cyclic {
		a.order = a.topoOrder(succ)
	}
}

// checkCycles reports one CYCLE per strongly connected component that holds
// a cycle (Tarjan), at the first edge of the cycle in document order.
func (a *analysis) checkCycles(succ [][]int) bool {
	n := len(a.doc.Nodes)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	comp := make([]int, n)
	var stack []int
	next, ncomp := 0, 0
	var strong func(v int)
	strong = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range succ[v] {
			if index[w] < 0 {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = ncomp
				if w == v {
					break
				}
			}
			ncomp++
		}
	}
	for v := range n {
		if index[v] < 0 && a.unique[v] {
			strong(v)
		}
	}
	// An edge inside one component (including a self-loop) lies on a cycle.
	firstEdge := map[int]int{}
	members := map[int][]string{}
	for _, e := range a.edges {
		c := comp[e.from]
		if comp[e.to] != c {
			continue
		}
		if _, seen := firstEdge[c]; !seen {
			firstEdge[c] = e.index
		}
	}
	if len(firstEdge) == 0 {
		return false
	}
	for v := range n {
		if _, ok := firstEdge[comp[v]]; ok && a.unique[v] {
			members[comp[v]] = append(members[comp[v]], a.doc.Nodes[v].ID)
		}
	}
	comps := make([]int, 0, len(firstEdge))
	for c := range firstEdge {
		comps = append(comps, c)
	}
	slices.SortFunc(comps, func(x, y int) int { return firstEdge[x] - firstEdge[y] })
	for _, c := range comps {
		ids := members[c]
		slices.Sort(ids)
		a.add(CodeCycle, edgePath(firstEdge[c]), "cycle through nodes %s", strings.Join(ids, ", "))
	}
	return true
}

// topoOrder is Kahn's algorithm over the resolved edges with the ready set
// kept sorted by node id, so the order depends only on content.
func (a *analysis) topoOrder(succ [][]int) []string {
	nodes := a.doc.Nodes
	indeg := make([]int, len(nodes))
	for _, e := range a.edges {
		indeg[e.to]++
	}
	var ready []int
	for i := range nodes {
		if a.unique[i] && indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	byID := func(x, y int) int { return strings.Compare(nodes[x].ID, nodes[y].ID) }
	slices.SortFunc(ready, byID)
	order := make([]string, 0, len(a.index))
	for len(ready) > 0 {
		v := ready[0]
		ready = ready[1:]
		order = append(order, nodes[v].ID)
		for _, w := range succ[v] {
			indeg[w]--
			if indeg[w] == 0 {
				pos, _ := slices.BinarySearchFunc(ready, w, byID)
				ready = slices.Insert(ready, pos, w)
			}
		}
	}
	return order
}
