package service

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// testSet registers one flag of each kind plus the skeleton's groups.
func testSet(getenv func(string) string) (*FlagSet, *Options, *struct {
	S string
	B bool
	I int
	D time.Duration
}) {
	fs := NewFlagSet("svc", getenv)
	o := &Options{}
	v := &struct {
		S string
		B bool
		I int
		D time.Duration
	}{}
	fs.AddServing(o, ServingDefaults{})
	fs.AddKube(&o.Kube, 50, 100)
	fs.AddPod(&o.Pod)
	fs.AddLeaderElection(&o.LeaderElection, "svc-lease")
	fs.StringVar(&v.S, "batch-poller-address", "x:1", "s")
	fs.BoolVar(&v.B, "batch-enabled", false, "b")
	fs.IntVar(&v.I, "workers", 4, "i")
	fs.DurationVar(&v.D, "poll-interval", 15*time.Second, "d")
	return fs, o, v
}

func TestEnvNameIsOneRule(t *testing.T) {
	for flag, env := range map[string]string{
		"batch-poll-seconds":        "BATCH_POLL_SECONDS",
		"max-output-bytes":          "MAX_OUTPUT_BYTES",
		"leader-elect":              "LEADER_ELECT",
		"metrics-bind-address":      "METRICS_BIND_ADDRESS",
		"health-probe-bind-address": "HEALTH_PROBE_BIND_ADDRESS",
		"kubeconfig":                "KUBECONFIG",
	} {
		if got := EnvName(flag); got != env {
			t.Errorf("EnvName(%q) = %q, want %q", flag, got, env)
		}
	}
}

func TestParseRules(t *testing.T) {
	cases := []struct {
		rule    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(o *Options, s string, b bool, i int, d time.Duration) bool
	}{
		{"defaults are controller-runtime's ports and leader election on", nil, nil, "",
			func(o *Options, _ string, b bool, i int, _ time.Duration) bool {
				return o.MetricsBindAddress == ":8080" && o.HealthProbeBindAddress == ":8081" && o.LeaderElection.Enabled &&
					o.LeaderElection.ID == "svc-lease" && o.LogLevel == "info" && !b && i == 4
			}},
		{"the environment fills a flag not given", nil, map[string]string{"WORKERS": "9", "BATCH_POLLER_ADDRESS": "bp:9090"}, "",
			func(_ *Options, s string, _ bool, i int, _ time.Duration) bool { return i == 9 && s == "bp:9090" }},
		{"a flag on the command line beats its variable", []string{"--workers=3"}, map[string]string{"WORKERS": "9"}, "",
			func(_ *Options, _ string, _ bool, i int, _ time.Duration) bool { return i == 3 }},
		{"booleans parse with strconv.ParseBool: 1 is true", nil, map[string]string{"BATCH_ENABLED": "1"}, "",
			func(_ *Options, _ string, b bool, _ int, _ time.Duration) bool { return b }},
		{"booleans parse with strconv.ParseBool: LEADER_ELECT=0 is false", nil, map[string]string{"LEADER_ELECT": "0"}, "",
			func(o *Options, _ string, _ bool, _ int, _ time.Duration) bool { return !o.LeaderElection.Enabled }},
		{"a bare boolean flag is true", []string{"--batch-enabled"}, nil, "",
			func(_ *Options, _ string, b bool, _ int, _ time.Duration) bool { return b }},
		{"a malformed boolean variable is refused by name", nil, map[string]string{"BATCH_ENABLED": "yes"}, "BATCH_ENABLED", nil},
		{"a malformed integer variable is refused by name", nil, map[string]string{"WORKERS": "many"}, "WORKERS", nil},
		{"a malformed duration variable is refused by name", nil, map[string]string{"POLL_INTERVAL": "15"}, "POLL_INTERVAL", nil},
		{"a malformed flag is refused", []string{"--workers=x"}, nil, "workers", nil},
		{"an unknown flag is refused", []string{"--addr=:1"}, nil, "addr", nil},
		{"a stray argument is refused", []string{"extra"}, nil, "unexpected arguments", nil},
		{"an invalid log level is refused, not defaulted", nil, map[string]string{"LOG_LEVEL": "verbose"}, "LOG_LEVEL", nil},
		{"log levels are case-insensitive", []string{"--log-level=DEBUG"}, nil, "",
			func(o *Options, _ string, _ bool, _ int, _ time.Duration) bool { return o.LogLevel == "DEBUG" }},
		{"lease timings must nest", []string{"--leader-elect-renew-deadline=20s"}, nil, "leader-elect-retry-period", nil},
		{"lease timings do not matter without leader election", []string{"--leader-elect=false", "--leader-elect-renew-deadline=20s"}, nil, "",
			func(o *Options, _ string, _ bool, _ int, _ time.Duration) bool { return !o.LeaderElection.Enabled }},
		{"the client rate limit must be positive", []string{"--kube-api-qps=0"}, nil, "kube-api-qps", nil},
		{"the pod name and namespace come from the downward API variables", nil, map[string]string{"POD_NAME": "p-1", "POD_NAMESPACE": "ns"}, "",
			func(o *Options, _ string, _ bool, _ int, _ time.Duration) bool {
				return o.Pod.Name == "p-1" && o.Pod.Namespace == "ns" && o.LeaseNamespace() == "ns"
			}},
		{"an explicit Lease namespace beats the pod's", []string{"--leader-election-namespace=x"}, map[string]string{"POD_NAMESPACE": "ns"}, "",
			func(o *Options, _ string, _ bool, _ int, _ time.Duration) bool { return o.LeaseNamespace() == "x" }},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			fs, o, v := testSet(envOf(c.env))
			err := fs.Parse(c.args, &bytes.Buffer{})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %v, want an error naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(o, v.S, v.B, v.I, v.D) {
				t.Fatalf("got %+v %+v", o, v)
			}
		})
	}
}

func TestVersionAndHelpPrintAndStop(t *testing.T) {
	fs, _, _ := testSet(envOf(nil))
	var out bytes.Buffer
	if err := fs.Parse([]string{"--version"}, &out); !errors.Is(err, ErrVersion) {
		t.Fatalf("--version: %v", err)
	}
	if !strings.HasPrefix(out.String(), "svc version ") || !strings.Contains(out.String(), "revision ") {
		t.Fatalf("--version printed %q", out.String())
	}
	fs, _, _ = testSet(envOf(nil))
	out.Reset()
	if err := fs.Parse([]string{"--help"}, &out); !errors.Is(err, ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	if !strings.Contains(out.String(), "--metrics-bind-address  [METRICS_BIND_ADDRESS] (default :8080)") {
		t.Fatalf("--help printed %q", out.String())
	}
}

func TestMarkdownListsEveryFlagWithItsVariable(t *testing.T) {
	fs, _, _ := testSet(envOf(nil))
	md := fs.Markdown()
	for _, f := range fs.Flags() {
		if !strings.Contains(md, "| `--"+f.Name+"` | `"+f.Env+"` |") {
			t.Errorf("table lacks --%s", f.Name)
		}
	}
	if !strings.Contains(md, "| `--kubeconfig` | `KUBECONFIG` | `(empty)` |") {
		t.Errorf("an empty default is shown as (empty):\n%s", md)
	}
}
