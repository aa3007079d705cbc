package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"daskgo/compat"
)

// version is this build's version; release builds set it with
// -ldflags "-X main.version=...".
var version = "0.1.0.dev0"

// options are the command line: every flag of `dask scheduler`
// (distributed/cli/dask_scheduler.py main), with the same names, defaults
// and spellings, plus this binary's own (config, python, log level,
// profiles, op table).
type options struct {
	host, port, iface, protocol     string
	tlsCA, tlsCert, tlsKey          string
	dashboardAddr, dashboardPrefix  string
	dashboard, jupyter              bool
	pidFile, schedulerFile          string
	preload, preloadArgv            []string
	idleTimeout                     string
	configFile, python, logLevel    string
	cpuProfile, heapProfile         string
	listOps, showVersion, help      bool
	idleTimeoutSet, dashboardPfxSet bool
}

// parseArgs reads the command line. args excludes the program name; a
// leading "scheduler" is dropped, so that `dask-go-scheduler scheduler ...`
// reads as `dask scheduler ...` does (the package's `dask-scheduler` and
// `dask scheduler` launchers pass their arguments on unchanged).
func parseArgs(args []string, stderr io.Writer) (options, error) {
	if len(args) > 0 && args[0] == "scheduler" {
		args = args[1:]
	}
	var o options
	fs := pflag.NewFlagSet("dask-go-scheduler", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.StringVar(&o.host, "host", "", "URI, IP or hostname of this server")
	fs.StringVar(&o.port, "port", "", "Serving port (default 8786, or the port in --host)")
	fs.StringVar(&o.iface, "interface", "", "Preferred network interface like 'eth0' or 'ib0'")
	fs.StringVar(&o.protocol, "protocol", "", "Protocol like tcp, tls, or ucx")
	fs.StringVar(&o.tlsCA, "tls-ca-file", "", "CA cert(s) file for TLS (in PEM format)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "certificate file for TLS (in PEM format)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "private key file for TLS (in PEM format)")
	fs.StringVar(&o.dashboardAddr, "dashboard-address", ":8787", "Address on which to listen for diagnostics dashboard")
	fs.BoolVar(&o.dashboard, "dashboard", true, "Launch the Dashboard (--no-dashboard: do not)")
	noDashboard := fs.Bool("no-dashboard", false, "Do not launch the dashboard (its HTTP routes still answer, as in distributed)")
	fs.BoolVar(&o.jupyter, "jupyter", false, "Start a Jupyter Server in the same process (not supported here)")
	fs.Bool("no-jupyter", false, "")
	fs.Bool("show", false, "Show web UI (DEPRECATED, ignored)")
	fs.Bool("no-show", false, "(DEPRECATED, ignored)")
	fs.StringVar(&o.dashboardPrefix, "dashboard-prefix", "", "Prefix for the dashboard app")
	fs.String("use-xheaders", "False", "Use xheaders in dashboard app for ssl termination in header (DEPRECATED, ignored)")
	fs.StringVar(&o.pidFile, "pid-file", "", "File to write the process PID")
	fs.StringVar(&o.schedulerFile, "scheduler-file", "", "File to write connection information")
	fs.StringArrayVar(&o.preload, "preload", nil, "Module that should be loaded by the scheduler process (run in the scheduler's Python host)")
	fs.StringVar(&o.idleTimeout, "idle-timeout", "", "Time of inactivity after which to kill the scheduler")
	fs.BoolVar(&o.showVersion, "version", false, "Show the version and exit.")
	fs.BoolVarP(&o.help, "help", "h", false, "Show this message and exit.")
	fs.StringVar(&o.configFile, "config", "", "a dask config YAML file, above ~/.config/dask, /etc/dask and $DASK_CONFIG (DASK_* env vars still win)")
	fs.StringVar(&o.python, "python", "python3", "Python interpreter of the clients' environment, for the graph materializer")
	fs.StringVar(&o.logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a Go CPU profile (pprof) of the whole run to this file")
	fs.StringVar(&o.heapProfile, "heap-profile", "", "write a Go heap profile to this file on SIGUSR1 (FILE.N for the N-th) and at exit")
	fs.BoolVar(&o.listOps, "list-ops", false, "print the op table (every distributed scheduler op and what it gets here) as JSON and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: dask-go-scheduler [OPTIONS]\n\n  Launch a Dask scheduler (Go); the options are `dask scheduler`'s.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if len(preloads(args)) > 0 {
		// dask scheduler hands what it does not know to the preloads'
		// click command (PRELOAD_ARGV, ignore_unknown_options): dask-gateway's
		// --dg-* options; the host checks them (validate_preload_argv)
		args, o.preloadArgv = splitPreloadArgv(fs, args)
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.help {
		fs.SetOutput(stderr)
		fs.Usage()
		return o, pflag.ErrHelp
	}
	if *noDashboard {
		o.dashboard = false
	}
	if fs.Changed("no-jupyter") {
		o.jupyter = false
	}
	o.idleTimeoutSet = fs.Changed("idle-timeout")
	o.dashboardPfxSet = fs.Changed("dashboard-prefix")
	if fs.NArg() > 0 {
		// dask scheduler takes extra arguments only for a --preload's
		// own command line (PRELOAD_ARGV); validate_preload_argv's error
		return o, fmt.Errorf("got unexpected extra argument(s): (%s). If you intended these as values for a --preload module, "+
			"list --preload before them", strings.Join(fs.Args(), " "))
	}
	return o, nil
}

// splitPreloadArgv separates the options this command knows (and their
// values) from the rest, which dask scheduler's click parser collects as
// preload_argv: unknown options, their values, positionals, everything
// after "--".
func splitPreloadArgv(fs *pflag.FlagSet, args []string) (known, extra []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		var f *pflag.Flag
		switch {
		case a == "--":
			return known, append(extra, args[i+1:]...)
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			f = fs.Lookup(name)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			f = fs.ShorthandLookup(a[1:2])
		}
		if f == nil {
			extra = append(extra, a)
			continue
		}
		known = append(known, a)
		if !strings.Contains(a, "=") && f.NoOptDefVal == "" && i+1 < len(args) && (len(a) == 2 || strings.HasPrefix(a, "--")) {
			i++
			known = append(known, args[i])
		}
	}
	return known, extra
}

// preloads are the --preload values in args, read without the flag parser
// (which stopped at an option it does not know).
func preloads(args []string) []string {
	var out []string
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--preload="); ok {
			out = append(out, v)
		} else if a == "--preload" && i+1 < len(args) {
			out = append(out, args[i+1])
		}
	}
	return out
}

// unsupported names, and fails on, what `dask scheduler` can do and this
// scheduler cannot, instead of starting something other than asked.
func (o options) unsupported() error {
	var errs []error
	if o.jupyter {
		errs = append(errs, errors.New("--jupyter: a Jupyter server inside the scheduler is Python; run Jupyter beside it"))
	}
	for _, p := range strings.Split(o.protocol, ",") {
		if p = strings.TrimSuffix(strings.TrimSpace(p), "://"); p != "" && p != "tcp" && p != "tls" {
			errs = append(errs, fmt.Errorf("--protocol %s: only tcp and tls are supported", p))
		}
	}
	if scheme, _, ok := strings.Cut(o.host, "://"); ok && scheme != "tcp" && scheme != "tls" {
		errs = append(errs, fmt.Errorf("--host %s: only tcp:// and tls:// are supported", o.host))
	}
	return errors.Join(errs...)
}

// tlsFlags reports whether any --tls-* flag was given.
func (o options) tlsFlags() bool { return o.tlsCA != "" || o.tlsCert != "" || o.tlsKey != "" }

// listenAddress is where to listen, as dask scheduler and
// address_from_user_args derive it: the scheme from --protocol, else
// --host's, else tls when TLS flags are given or encryption is required,
// else defaultScheme (distributed.comm.default-scheme); the port from
// --port, else the one in --host, else 8786; the host from --host, else
// --interface's IPv4 address, else every interface.
func (o options) listenAddress(defaultScheme string, requireEncryption bool) (string, error) {
	host, scheme := o.host, ""
	if sc, rest, ok := strings.Cut(host, "://"); ok {
		scheme, host = sc, rest
	}
	if p := strings.TrimSuffix(strings.TrimSpace(o.protocol), "://"); p != "" {
		if strings.Contains(p, ",") {
			return "", fmt.Errorf("--protocol %s: one listener only", o.protocol)
		}
		scheme = p
	}
	if scheme == "" {
		switch {
		case o.tlsFlags() || requireEncryption:
			scheme = "tls"
		case defaultScheme != "":
			scheme = defaultScheme
		default:
			scheme = "tcp"
		}
	}
	port := ""
	if h, p, err := net.SplitHostPort(host); err == nil {
		host, port = h, p
	}
	if o.port != "" {
		if strings.Contains(o.port, ",") {
			return "", fmt.Errorf("--port %s: one listener only (lists of ports go with lists of protocols)", o.port)
		}
		port = o.port
	}
	if port == "" {
		port = "8786"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("--port %s: not a port number", port)
	}
	if o.iface != "" {
		if host != "" {
			return "", errors.New("--host and --interface both given; give one")
		}
		ip, err := interfaceIP(o.iface)
		if err != nil {
			return "", err
		}
		host = ip
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// interfaceIP is distributed.utils.get_ip_interface: the interface's first
// IPv4 address.
func interfaceIP(name string) (string, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("--interface %s: %w", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", fmt.Errorf("--interface %s: %w", name, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("--interface %s has no IPv4 address", name)
}

// dashboardListen is --dashboard-address as distributed reads it: ":8787",
// "8787", "host:port" or a URL; port 0 picks a free one.
func (o options) dashboardListen() (string, error) {
	a := o.dashboardAddr
	if _, rest, ok := strings.Cut(a, "://"); ok {
		a = rest
	}
	if _, err := strconv.Atoi(a); err == nil {
		a = ":" + a
	}
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return "", fmt.Errorf("--dashboard-address %q: %w", o.dashboardAddr, err)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("--dashboard-address %q: port must be 0..65535", o.dashboardAddr)
	}
	return net.JoinHostPort(h, p), nil
}

// idleTimeoutOr is --idle-timeout when given (distributed's
// parse_timedelta spellings: "5 minutes", "1h", "600"), else the config's.
func (o options) idleTimeoutOr(configured time.Duration) (time.Duration, error) {
	if !o.idleTimeoutSet || o.idleTimeout == "" {
		return configured, nil
	}
	d, err := compat.ParseTimedelta(o.idleTimeout)
	if err != nil {
		return 0, fmt.Errorf("--idle-timeout %q: %w", o.idleTimeout, err)
	}
	return d, nil
}

// writePIDFile writes the PID as `dask scheduler --pid-file` does; the
// returned function removes it at exit.
func writePIDFile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("--pid-file: %w", err)
	}
	abs, _ := filepath.Abs(path)
	return func() { os.Remove(abs) }, nil
}
