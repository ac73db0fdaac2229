package execution

import enumspb "go.temporal.io/api/enums/v1"

// SearchAttributeTypes lists weft's custom search attributes with their
// Temporal types (SPEC §8), in a stable order.
var SearchAttributeTypes = []SearchAttribute{
	{SearchAttrTenant, "Keyword", enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	{SearchAttrWorkflowKey, "Keyword", enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	{SearchAttrMode, "Keyword", enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	{SearchAttrRevision, "Int", enumspb.INDEXED_VALUE_TYPE_INT},
}

// SearchAttribute is one custom search attribute weft needs.
type SearchAttribute struct {
	Name string
	Type string // as the CLI spells it (--search-attribute Name=Type)
	// Indexed is the same type for the OperatorService API.
	Indexed enumspb.IndexedValueType
}
