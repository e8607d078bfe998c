// Command temporal-dev runs a single-process Temporal server (frontend, history, matching and
// worker) on SQLite, for Cairn's tests and embedded mode. Unlike `temporal server start-dev`
// it runs Server 1.32, which can skip time in workflows started with a time-skipping config.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "temporal-dev:", err)
		os.Exit(1)
	}
}

func run() error {
	ip := flag.String("ip", "127.0.0.1", "address the frontend listens on")
	port := flag.Int("port", 7233, "frontend gRPC port")
	dbFile := flag.String("db-filename", "", "SQLite file (created if missing); in memory when empty")
	logLevel := flag.String("log-level", "warn", "server log level")
	var namespaces, dynValues, pragmas list
	flag.Var(&namespaces, "namespace", "extra namespace to register (repeatable; `default` always is)")
	flag.Var(&dynValues, "dynamic-config-value", "KEY=JSON_VALUE (repeatable)")
	flag.Var(&pragmas, "sqlite-pragma", "NAME=VALUE (repeatable)")
	logFormat := flag.String("log-format", "json", "json, or pretty/console")
	// Accepted so the binary can stand in for `temporal server start-dev` (the SDK's
	// TestWorkflowEnvironment.createLocal passes these); there is no UI.
	flag.Bool("headless", true, "ignored")
	flag.String("ui-ip", "", "ignored")
	flag.Int("ui-port", 0, "ignored")
	args := os.Args[1:]
	if len(args) >= 2 && args[0] == "server" && args[1] == "start-dev" {
		args = args[2:]
	}
	if err := flag.CommandLine.Parse(args); err != nil {
		return err
	}
	if *logFormat == "pretty" { // start-dev's name for zap's console format
		*logFormat = "console"
	}

	// Same defaults as `temporal server start-dev`, plus time skipping.
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.MakeKey("frontend.WorkflowTimeSkippingEnabled"):           true,
		dynamicconfig.MakeKey("system.forceSearchAttributesCacheRefreshOnRead"): true,
		dynamicconfig.MakeKey("frontend.persistenceMaxQPS"):                     10000,
		dynamicconfig.MakeKey("history.persistenceMaxQPS"):                      45000,
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                        8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key():        100,
	}
	for _, kv := range dynValues {
		k, raw, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("dynamic config value %q is not KEY=VALUE", kv)
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			v = raw // bare strings need no quotes
		}
		if n, isNum := v.(json.Number); isNum { // dynamic config wants int, not int64 or float
			if i, err := n.Int64(); err == nil {
				v = int(i)
			} else if f, err := n.Float64(); err == nil {
				v = f
			}
		}
		dyn[dynamicconfig.MakeKey(k)] = v
	}

	sql := &config.SQL{PluginName: sqliteplugin.PluginName, ConnectAttributes: map[string]string{"mode": "rwc"}, DatabaseName: *dbFile}
	if *dbFile == "" { // the plugin creates the schema itself for in-memory databases
		sql.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		sql.DatabaseName = strconv.Itoa(rand.Intn(9999999))
	}
	for _, kv := range pragmas {
		k, v, _ := strings.Cut(kv, "=")
		sql.ConnectAttributes[k] = v
	}
	if *dbFile != "" {
		if _, err := os.Stat(*dbFile); os.IsNotExist(err) {
			if err := sqliteschema.SetupSchema(sql); err != nil {
				return fmt.Errorf("setting up schema: %w", err)
			}
		}
	}
	var nsConfigs []*sqliteschema.NamespaceConfig
	for _, ns := range append([]string{"default"}, namespaces...) {
		c, err := sqliteschema.NewNamespaceConfig("active", ns, false, nil)
		if err != nil {
			return err
		}
		nsConfigs = append(nsConfigs, c)
	}
	if err := sqliteschema.CreateNamespaces(sql, nsConfigs...); err != nil {
		return fmt.Errorf("creating namespaces: %w", err)
	}

	frontend := fmt.Sprintf("%s:%d", *ip, *port)
	conf := &config.Config{}
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = *ip
	conf.Persistence.DefaultStore = "sqlite-default"
	conf.Persistence.VisibilityStore = "sqlite-default"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite-default": {SQL: sql}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10, MasterClusterName: "active", CurrentClusterName: "active",
		ClusterInformation: map[string]cluster.ClusterInformation{"active": {
			Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend, ClusterID: uuid.NewString(),
		}},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend
	conf.Services = map[string]config.Service{}
	hosts := map[primitives.ServiceName]static.Hosts{}
	for _, svc := range []primitives.ServiceName{primitives.FrontendService, primitives.HistoryService, primitives.MatchingService, primitives.WorkerService} {
		p := *port
		if svc != primitives.FrontendService {
			p = 0
		}
		if p == 0 {
			var err error
			if p, err = freePort(*ip); err != nil {
				return err
			}
		}
		conf.Services[string(svc)] = config.Service{RPC: config.RPC{GRPCPort: p, BindOnIP: *ip}}
		hosts[svc] = static.SingleLocalHost(fmt.Sprintf("%s:%d", *ip, p))
	}

	server, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(log.NewZapLogger(log.BuildZapLogger(log.Config{Level: *logLevel, Format: *logFormat}))),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return err
	}
	if err := server.Start(); err != nil {
		return err
	}
	defer server.Stop()
	if err := waitReady(frontend); err != nil {
		return err
	}
	fmt.Printf("Server: %s\n", frontend)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	fmt.Println("Stopping server...")
	return nil
}

// waitReady returns once the frontend answers for the default namespace.
func waitReady(hostPort string) error {
	c, err := client.Dial(client.Options{HostPort: hostPort, Logger: log.NewSdkLogger(log.NewNoopLogger())})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("frontend not ready: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePort asks the kernel for a port nobody listens on.
func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
