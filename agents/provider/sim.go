package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/weftworks/weft/sampledata"
)

// CodeNoDefault: the sim has no script output and no schema-valid default
// can be generated from the output schema (not retryable; set sim.output).
const CodeNoDefault = "NO_DEFAULT_OUTPUT"

// Sim is the deterministic provider: no network, no cost. In its first turn
// it asks for the script's tool calls (when there are any); then it answers
// the script's output, or the deterministic schema-valid default of the
// output schema (package sampledata, as simulation mode uses). For an agent-decision node
// the answer is an object whose "outcome" is the script's outcome, else the
// output's own valid outcome, else "pass". Token counts are the script's
// declared usage (sim.usage) when given, else deterministic estimates (a
// token per 4 bytes) at no cost. A reply that needs more output tokens
// than the request's MaxOutputTokens is cut there, as a model's would be:
// no tool calls, its content truncated.
type Sim struct{}

// Name implements Provider.
func (Sim) Name() string { return NameSim }

// Turn implements Provider.
func (Sim) Turn(ctx context.Context, req Request) (Reply, error) {
	if err := ctx.Err(); err != nil {
		return Reply{}, err
	}
	reply, err := simTurn(req)
	if err != nil {
		return Reply{}, err
	}
	if limit := req.MaxOutputTokens; limit > 0 && reply.Usage.OutputTokens > limit {
		keep := int(int64(len(reply.Content)) * limit / reply.Usage.OutputTokens)
		reply.Content, reply.ToolCalls = reply.Content[:keep], nil
		if reply.Usage.CostUSD > 0 {
			reply.Usage.CostUSD = reply.Usage.CostUSD * float64(limit) / float64(reply.Usage.OutputTokens)
		}
		reply.Usage.OutputTokens = limit
	}
	return reply, nil
}

// Estimate implements Estimator: exactly what Turn will report.
func (Sim) Estimate(req Request) Estimate {
	reply, err := simTurn(req)
	if err != nil {
		// The turn will fail without using anything.
		zero := 0.0
		return Estimate{InputTokens: 0, OutputTokens: 0, CostUSD: &zero}
	}
	cost := reply.Usage.CostUSD
	return Estimate{InputTokens: reply.Usage.InputTokens, OutputTokens: reply.Usage.OutputTokens, CostUSD: &cost}
}

// simTurn is the sim's reply to req, before any output limit.
func simTurn(req Request) (Reply, error) {
	in := 0
	asked := false
	for _, m := range req.Messages {
		in += len(m.Content)
		for _, c := range m.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
		if m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
			asked = true
		}
	}
	model := req.Model
	if model == "" {
		model = NameSim
	}
	reply := Reply{Model: model}
	script := req.Sim
	if script == nil {
		script = &SimScript{}
	}
	out := 0
	if len(script.ToolCalls) > 0 && !asked {
		for i, c := range script.ToolCalls {
			args := "{}"
			if len(bytes.TrimSpace(c.Input)) > 0 {
				var b bytes.Buffer
				if json.Compact(&b, c.Input) == nil {
					args = b.String()
				}
			}
			reply.ToolCalls = append(reply.ToolCalls, ToolCall{ID: "sim-call-" + strconv.Itoa(i+1), Name: c.Tool, Arguments: args})
			out += len(c.Tool) + len(args)
		}
	} else {
		answer, err := simAnswer(script, req)
		if err != nil {
			return Reply{}, &Error{Code: CodeNoDefault, Message: "the sim has no sim.output and cannot generate a default from the output schema (" +
				err.Error() + "); give the revision a sim.output"}
		}
		reply.Content = string(answer)
		out = len(reply.Content)
	}
	reply.Usage = Usage{InputTokens: int64((in + 3) / 4), OutputTokens: int64((out + 3) / 4), Priced: true}
	if u := script.Usage; u != nil {
		reply.Usage = Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD, Priced: true}
	}
	return reply, nil
}

func simAnswer(script *SimScript, req Request) (json.RawMessage, error) {
	answer := script.Output
	if len(bytes.TrimSpace(answer)) == 0 {
		var err error
		if answer, err = sampledata.Generate(req.OutputSchema); err != nil {
			return nil, err
		}
	}
	if !req.Decision {
		return answer, nil
	}
	obj := map[string]json.RawMessage{}
	if json.Unmarshal(answer, &obj) != nil || obj == nil {
		obj = map[string]json.RawMessage{}
	}
	outcome := script.Outcome
	if outcome == "" {
		var have string
		_ = json.Unmarshal(obj["outcome"], &have)
		outcome = OutcomePass
		if have == OutcomeFail {
			outcome = OutcomeFail
		}
	}
	obj["outcome"], _ = json.Marshal(outcome)
	return json.Marshal(obj)
}
