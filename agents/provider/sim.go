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
// output's own valid outcome, else "pass". Token counts are deterministic
// estimates (a token per 4 bytes); cost is 0.
type Sim struct{}

// Name implements Provider.
func (Sim) Name() string { return NameSim }

// Turn implements Provider.
func (Sim) Turn(ctx context.Context, req Request) (Reply, error) {
	if err := ctx.Err(); err != nil {
		return Reply{}, err
	}
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
