package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Handshake is the go-plugin handshake Cairn and its plugins share. The magic cookie only tells
// a person who runs the binary by hand that it is a plugin; it is no security measure.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "SERVICE_EXTENSION",
	MagicCookieValue: "b1f5ab3e4d7c4c0e9a3f2d6e8c1b7a90",
}

// Environment variables of tool mode: the host starts the plugin inside a run's sandbox with
// the tool's name and the path of a JSON file holding the run's ToolSpec.
const (
	EnvToolName = "CAIRN_PLUGIN_TOOL"
	EnvToolSpec = "CAIRN_PLUGIN_TOOL_SPEC"
)

// Serve serves ext and never returns. Started by Cairn's plugin host, it answers over go-plugin;
// started inside a run's sandbox for a tool, it runs that tool and exits with its exit code.
func Serve(ext *Extension) {
	ext.mu.Lock()
	ext.served = true
	ext.mu.Unlock()
	if name := os.Getenv(EnvToolName); name != "" {
		os.Exit(runTool(ext, name, os.Getenv(EnvToolSpec)))
	}
	go exitWithParent(os.Getppid())
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         goplugin.PluginSet{"cairn": &grpcPlugin{ext: ext}},
		GRPCServer:      goplugin.DefaultGRPCServer,
	})
	os.Exit(0)
}

// exitWithParent ends the plugin when the process that started it is gone (a server killed
// outright cannot end its plugins), so a plugin never outlives its server.
func exitWithParent(parent int) {
	for range time.Tick(time.Second) {
		if os.Getppid() != parent {
			os.Exit(0)
		}
	}
}

type toolSpecFile struct {
	Command   string         `json:"command"`
	DryRun    bool           `json:"dryRun"`
	ExtraVars map[string]any `json:"extraVars"`
}

func runTool(ext *Extension, name, specPath string) int {
	runner, ok := ext.tools[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "cairn plugin: this plugin has no tool %q\n", name)
		return 2
	}
	var file toolSpecFile
	if specPath != "" {
		raw, err := os.ReadFile(specPath)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cairn plugin: cannot read the run's tool spec: %v\n", err)
			return 2
		}
		if err := json.Unmarshal(raw, &file); err != nil {
			fmt.Fprintf(os.Stderr, "cairn plugin: the run's tool spec is not JSON: %v\n", err)
			return 2
		}
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if k == EnvToolName || k == EnvToolSpec {
			continue
		}
		env[k] = v
	}
	dir, _ := os.Getwd()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if file.ExtraVars == nil {
		file.ExtraVars = map[string]any{}
	}
	res, err := runner(ctx, ToolSpec{Command: file.Command, DryRun: file.DryRun, ExtraVars: file.ExtraVars, Env: env, Dir: dir})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		if res.ExitCode == 0 {
			return 1
		}
	}
	return res.ExitCode
}

// grpcPlugin is the go-plugin side: it registers the Extension service on go-plugin's server.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	ext *Extension
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&serviceDesc, &server{ext: p.ext})
	return nil
}

func (p *grpcPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (interface{}, error) {
	return nil, fmt.Errorf("the Cairn SDK serves plugins; the host is Cairn")
}

type server struct{ ext *Extension }

type extensionServer interface {
	call(ctx context.Context, method string, in []byte) (any, error)
}

func (s *server) call(ctx context.Context, method string, in []byte) (any, error) {
	e := s.ext
	switch method {
	case "Describe":
		tools := make([]map[string]string, 0, len(e.toolOrder))
		for _, n := range e.toolOrder {
			tools = append(tools, map[string]string{"name": n})
		}
		return map[string]any{
			"protocol": ProtocolVersion, "tools": tools, "notifiers": nonNil(e.notifierOrder),
			"secretSources": nonNil(e.secretOrder), "dynamicSecretSources": nonNil(e.dynamicOrder),
			"aiProviders": nonNil(e.aiOrder),
		}, nil
	case "Notify":
		var req struct {
			Notifier string   `json:"notifier"`
			Event    RunEvent `json:"event"`
		}
		if err := json.Unmarshal(in, &req); err != nil {
			return nil, err
		}
		n, ok := e.notifiers[req.Notifier]
		if !ok {
			return nil, fmt.Errorf("no notifier %q", req.Notifier)
		}
		return map[string]any{}, n(ctx, req.Event)
	case "ResolveSecret":
		var req struct{ Source, Ref string }
		if err := json.Unmarshal(in, &req); err != nil {
			return nil, err
		}
		src, ok := e.secrets[req.Source]
		if !ok {
			return nil, fmt.Errorf("no secret source %q", req.Source)
		}
		v, err := src(ctx, req.Ref)
		if err != nil {
			return nil, err
		}
		return map[string]any{"value": v}, nil
	case "MintSecret":
		var req struct {
			Source, Ref string
			RunID       string `json:"runId"`
		}
		if err := json.Unmarshal(in, &req); err != nil {
			return nil, err
		}
		src, ok := e.dynamics[req.Source]
		if !ok {
			return nil, fmt.Errorf("no dynamic secret source %q", req.Source)
		}
		lease, err := src(ctx, req.Ref, req.RunID)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		e.leases[req.Source+"\x00"+lease.ID] = lease
		e.mu.Unlock()
		return map[string]any{"value": lease.Value, "leaseId": lease.ID, "ttlSeconds": int(lease.TTL / time.Second)}, nil
	case "RevokeLease":
		var req struct {
			Source  string
			LeaseID string `json:"leaseId"`
		}
		if err := json.Unmarshal(in, &req); err != nil {
			return nil, err
		}
		e.mu.Lock()
		lease, ok := e.leases[req.Source+"\x00"+req.LeaseID]
		delete(e.leases, req.Source+"\x00"+req.LeaseID)
		e.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("no lease %q of %q in this process", req.LeaseID, req.Source)
		}
		if lease.revoke != nil {
			if err := lease.revoke(ctx); err != nil {
				return nil, err
			}
		}
		return map[string]any{}, nil
	case "Complete":
		var req struct {
			Provider string `json:"provider"`
			AISettings
			System string `json:"system"`
			Prompt string `json:"prompt"`
		}
		if err := json.Unmarshal(in, &req); err != nil {
			return nil, err
		}
		p, ok := e.aiProviders[req.Provider]
		if !ok {
			return nil, fmt.Errorf("no AI provider %q", req.Provider)
		}
		text, err := p(ctx, req.AISettings, req.System, req.Prompt)
		if err != nil {
			return nil, err
		}
		return map[string]any{"text": text}, nil
	}
	return nil, fmt.Errorf("unknown method %s", method)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func handler(method string) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := &wrapperspb.BytesValue{}
		if err := dec(in); err != nil {
			return nil, err
		}
		out, err := srv.(extensionServer).call(ctx, method, in.GetValue())
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		return wrapperspb.Bytes(raw), nil
	}
}

// serviceDesc is cairn.plugin.v1.Extension of proto/cairn_plugin.proto, declared by hand.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: "cairn.plugin.v1.Extension",
	HandlerType: (*extensionServer)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Describe", Handler: handler("Describe")},
		{MethodName: "Notify", Handler: handler("Notify")},
		{MethodName: "ResolveSecret", Handler: handler("ResolveSecret")},
		{MethodName: "MintSecret", Handler: handler("MintSecret")},
		{MethodName: "RevokeLease", Handler: handler("RevokeLease")},
		{MethodName: "Complete", Handler: handler("Complete")},
	},
	Metadata: "cairn_plugin.proto",
}
