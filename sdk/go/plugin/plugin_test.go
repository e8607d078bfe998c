package plugin

import (
	"context"
	"testing"
)

func mustPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s: no panic", name)
		}
	}()
	f()
}

func TestRegistrationRules(t *testing.T) {
	ext := New()
	src := func(context.Context, string) (string, error) { return "", nil }
	tool := func(context.Context, ToolSpec) (ToolResult, error) { return ToolResult{}, nil }
	ext.RegisterSecretSource("a", src)
	ext.RegisterTool("a", tool) // another kind may share the name
	mustPanic(t, "empty", func() { ext.RegisterSecretSource(" ", src) })
	mustPanic(t, "duplicate", func() { ext.RegisterSecretSource("a", src) })
	mustPanic(t, "reserved", func() { ext.RegisterTool("bash", tool) })
	ext.served = true
	mustPanic(t, "after serve", func() { ext.RegisterSecretSource("b", src) })
}
