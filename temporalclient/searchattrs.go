package temporalclient

import (
	"context"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/execution"
)

// MissingSearchAttributes lists, in execution.SearchAttributeTypes order, weft's
// search attributes that the namespace lacks or holds with another type
// (each as "Name" or "Name (has T, wants U)").
func MissingSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes: %w", err)
	}
	have := resp.GetCustomAttributes()
	var missing []string
	for _, a := range execution.SearchAttributeTypes {
		t, ok := have[a.Name]
		switch {
		case !ok:
			missing = append(missing, a.Name)
		case t != a.Indexed:
			missing = append(missing, fmt.Sprintf("%s (has %s, wants %s)", a.Name, typeName(t), a.Type))
		}
	}
	return missing, nil
}

// RegisterSearchAttributes adds the search attributes the namespace lacks
// (OperatorService.AddSearchAttributes). It returns the names it added. A
// server that refuses (Temporal Cloud without the permission, for example)
// returns an error; registering them there is a documented setup step. An
// attribute that exists with another type is reported, never changed.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes: %w", err)
	}
	have := resp.GetCustomAttributes()
	add := map[string]enumspb.IndexedValueType{}
	var names, wrong []string
	for _, a := range execution.SearchAttributeTypes {
		t, ok := have[a.Name]
		switch {
		case !ok:
			add[a.Name] = a.Indexed
			names = append(names, a.Name)
		case t != a.Indexed:
			wrong = append(wrong, fmt.Sprintf("%s (has %s, wants %s)", a.Name, typeName(t), a.Type))
		}
	}
	if len(add) > 0 {
		if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace:        namespace,
			SearchAttributes: add,
		}); err != nil {
			return nil, fmt.Errorf("add search attributes %v: %w", names, err)
		}
	}
	if len(wrong) > 0 {
		return names, fmt.Errorf("search attributes registered with another type: %s", strings.Join(wrong, ", "))
	}
	return names, nil
}

// typeName spells an indexed type as the CLI does ("Keyword", "Int").
func typeName(t enumspb.IndexedValueType) string {
	s := strings.TrimPrefix(t.String(), "INDEXED_VALUE_TYPE_")
	switch s {
	case "KEYWORD_LIST":
		return "KeywordList"
	case "DATETIME":
		return "Datetime"
	}
	if s == "" {
		return "Unspecified"
	}
	return s[:1] + strings.ToLower(s[1:])
}
