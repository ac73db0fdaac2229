package variables

import "fmt"

// Kind is the kind of value a variable renders.
type Kind string

// Variable kinds.
const (
	KindText       Kind = "text"
	KindNumber     Kind = "number"
	KindDate       Kind = "date"
	KindMoney      Kind = "money"
	KindIdentifier Kind = "identifier"
)

// Valid reports whether k is one of the declared kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindText, KindNumber, KindDate, KindMoney, KindIdentifier:
		return true
	}
	return false
}

// Definition is one offerable variable: what `GET /v1/variables` lists and
// what a template may reference.
type Definition struct {
	// Key is the variable key (see KeyPattern).
	Key string `json:"key"`
	// Label is the human label shown in a picker.
	Label string `json:"label"`
	// Kind is the kind of value the variable renders.
	Kind Kind `json:"kind"`
	// Scope is the permission needed to read the variable; empty means scope-less.
	Scope string `json:"scope,omitempty"`
	// RequiredBindings names the record bindings (e.g. "agentId") the source
	// needs in Request.Bindings to resolve the variable.
	RequiredBindings []string `json:"requiredBindings,omitempty"`
	// Sample is an example value for previews.
	Sample string `json:"sample,omitempty"`
	// Description explains the variable.
	Description string `json:"description,omitempty"`
}

// validate reports the first structural problem of d.
func (d Definition) validate() error {
	if !IsKey(d.Key) {
		return fmt.Errorf("variables: definition key %q does not match %s", d.Key, KeyPattern)
	}
	if d.Label == "" {
		return fmt.Errorf("variables: definition %q has no label", d.Key)
	}
	if !d.Kind.Valid() {
		return fmt.Errorf("variables: definition %q has unknown kind %q", d.Key, d.Kind)
	}
	for _, b := range d.RequiredBindings {
		if !IsKey(b) {
			return fmt.Errorf("variables: definition %q has invalid binding name %q", d.Key, b)
		}
	}
	return nil
}

// clone returns a copy of d that shares no slice with it.
func (d Definition) clone() Definition {
	if d.RequiredBindings != nil {
		d.RequiredBindings = append([]string(nil), d.RequiredBindings...)
	}
	return d
}
