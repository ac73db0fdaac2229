package variables

import (
	"context"
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/require"
)

// benchKeys are the 10 variables of the benchmark template. They are single
// segments so text/template can address them as `{{.key}}` on a map.
var benchKeys = []string{
	"customerName", "orderId", "totalAmount", "dueDate", "agentName",
	"tenantName", "runId", "workflowKey", "itemCount", "supportEmail",
}

var benchValues = map[string]string{
	"customerName": "Ada Lovelace", "orderId": "ORD-2026-000042", "totalAmount": "1,234.50 EUR",
	"dueDate": "2026-04-01", "agentName": "Support triage", "tenantName": "Acme Corp",
	"runId": "run_01J9Z7Q4K2", "workflowKey": "invoice-intake", "itemCount": "17",
	"supportEmail": "help@acme.example",
}

// benchTemplates returns the same 1 KiB text with 10 tokens written for
// Resolve (`{{ key }}`, exactly 1024 bytes) and for text/template (`{{.key}}`).
func benchTemplates() (ours, theirs string) {
	const filler = "Dear customer, thank you for your order. Our records show the following details; " +
		"please review them carefully and reply if anything looks wrong. "
	var b strings.Builder
	for i, k := range benchKeys {
		chunk := filler[:80+i%7]
		b.WriteString(chunk)
		b.WriteString("{{ " + k + " }}")
	}
	for b.Len() < 1024 {
		b.WriteString(".")
	}
	ours = b.String()
	theirs = ours
	for _, k := range benchKeys {
		theirs = strings.Replace(theirs, "{{ "+k+" }}", "{{."+k+"}}", 1)
	}
	return ours, theirs
}

func renderTextTemplate(src string) (string, error) {
	tmpl, err := template.New("t").Option("missingkey=zero").Parse(src)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, benchValues); err != nil {
		return "", err
	}
	return b.String(), nil
}

// TestBenchmarkTemplatesAgree checks the benchmarks compare the same work.
func TestBenchmarkTemplatesAgree(t *testing.T) {
	t.Parallel()
	ours, theirs := benchTemplates()
	require.Len(t, ours, 1024, "template is %d bytes, want 1024", len(ours))
	got := len(Extract(ours))
	require.Equal(t, 10, got, "template has %d variables, want 10", got)
	want, err := renderTextTemplate(theirs)
	require.NoError(t, err)
	require.Equal(t, want, Resolve(ours, benchValues, Keep), "outputs differ")
}

// BenchmarkResolve1KiB10Vars: Resolve scans and substitutes in one pass per call.
func BenchmarkResolve1KiB10Vars(b *testing.B) {
	ours, _ := benchTemplates()
	b.SetBytes(int64(len(ours)))
	b.ReportAllocs()
	for b.Loop() {
		if out := Resolve(ours, benchValues, Keep); len(out) == 0 {
			b.Fatal("empty")
		}
	}
}

// BenchmarkTextTemplate1KiB10Vars: like for like, text/template parses and
// executes the same template per call.
func BenchmarkTextTemplate1KiB10Vars(b *testing.B) {
	_, theirs := benchTemplates()
	b.SetBytes(int64(len(theirs)))
	b.ReportAllocs()
	for b.Loop() {
		if out, err := renderTextTemplate(theirs); err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkTextTemplatePreparsed1KiB10Vars: text/template executing a template
// parsed once outside the loop (the most favourable case for text/template).
func BenchmarkTextTemplatePreparsed1KiB10Vars(b *testing.B) {
	_, theirs := benchTemplates()
	tmpl := template.Must(template.New("t").Option("missingkey=zero").Parse(theirs))
	b.SetBytes(int64(len(theirs)))
	b.ReportAllocs()
	for b.Loop() {
		var sb strings.Builder
		if err := tmpl.Execute(&sb, benchValues); err != nil || sb.Len() == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegistryResolve1KiB10Vars: the registry path (whole-template
// validation, then rendering) with every value supplied in Request.Values.
func BenchmarkRegistryResolve1KiB10Vars(b *testing.B) {
	ours, _ := benchTemplates()
	reg, err := NewRegistry(ContextSource(), RunSource())
	if err != nil {
		b.Fatal(err)
	}
	req := Request{TenantID: "t", Values: benchValues}
	ctx := context.Background()
	b.SetBytes(int64(len(ours)))
	b.ReportAllocs()
	for b.Loop() {
		if out, err := reg.Resolve(ctx, ours, req); err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}
