// Command duplicate declares a tool name another plugin (hello) already has, and a notifier of its
// own; the host must skip the whole plugin.
package main

import (
	"context"

	"cairn.dev/sdk/plugin"
)

func main() {
	ext := plugin.New()
	ext.RegisterNotifier("duplicate-notifier", func(context.Context, plugin.RunEvent) error { return nil })
	ext.RegisterTool("hello", func(context.Context, plugin.ToolSpec) (plugin.ToolResult, error) {
		return plugin.ToolResult{}, nil
	})
	plugin.Serve(ext)
}
