package deploy

// Checks of the deployment files in this directory: the HAProxy and nginx configurations are
// run through the real tools when they are installed, and the systemd unit, env.example,
// compose.yaml and the Kubernetes manifests are parsed and checked against each other and
// against Tollgate's drain settings.

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// Tollgate's defaults for --drain-delay and --drain-timeout. After SIGTERM a node may take
// their sum (plus a leadership handover) to exit, so every service manager must wait longer.
const (
	defaultDrainDelay   = 5 * time.Second
	defaultDrainTimeout = 30 * time.Second
)

// lookTool returns the path of a validator. Without it the test is skipped, except in CI (the
// CI environment variable is set), where a missing haproxy must not silently skip the checks.
func lookTool(t *testing.T, name string, requiredInCI bool) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if requiredInCI && os.Getenv("CI") != "" {
		t.Fatalf("\n\n*** %s IS NOT INSTALLED, but CI is set: the deploy/ configurations cannot be "+
			"validated. Install it (apt-get install -y %s; .ci/run does this). ***\n\n", name, name)
	}
	if requiredInCI {
		t.Skipf("%s not on PATH; skipping (with CI set this is a failure)", name)
	}
	t.Skipf("%s not on PATH; skipping", name)
	return ""
}

func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s:\n%s", name, strings.Join(args, " "), out)
}

func TestHAProxyConfigs(t *testing.T) {
	haproxy := lookTool(t, "haproxy", true)
	// compose-haproxy.cfg names its servers tollgate-1..3, which only resolve inside the compose
	// network. It is validated too: its servers use "init-addr libc,none", so an unresolvable
	// name starts the server down (a warning) instead of failing the check.
	for _, f := range []string{"haproxy.cfg", "compose-haproxy.cfg"} {
		t.Run(f, func(t *testing.T) { runTool(t, haproxy, "-c", "-f", f) })
	}
}

// TestNginxConfig runs `nginx -t` (CI installs nginx, as it does HAProxy).
func TestNginxConfig(t *testing.T) {
	nginx := lookTool(t, "nginx", true)
	conf, err := filepath.Abs("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	// nginx.conf uses paths relative to the prefix (-p), so a temporary directory works without
	// root; -e stderr avoids opening the compiled-in error log before the file is read.
	runTool(t, nginx, "-p", t.TempDir(), "-e", "stderr", "-c", conf, "-t")
}

func TestSystemdUnit(t *testing.T) {
	unit := readFile(t, "tollgate.service")
	stop := regexp.MustCompile(`(?m)^TimeoutStopSec=(\d+)s?\s*$`).FindStringSubmatch(unit)
	if stop == nil {
		t.Fatal("tollgate.service: no TimeoutStopSec=<seconds>")
	}
	secs, _ := strconv.Atoi(stop[1])
	checkGrace(t, "tollgate.service TimeoutStopSec", time.Duration(secs)*time.Second, nil)
	for _, want := range []string{"\nEnvironmentFile=-/etc/tollgate/env\n", "\nKillSignal=SIGTERM\n", "\nExecStart=/usr/local/bin/tollgate "} {
		if !strings.Contains(unit, want) {
			t.Errorf("tollgate.service lacks %q", strings.TrimSpace(want))
		}
	}
}

// TestEnvExample checks that env.example documents every variable the tollgate command reads
// and the cluster settings, and that it sets nothing to an empty value.
func TestEnvExample(t *testing.T) {
	example := readFile(t, "env.example")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#?([A-Z][A-Z0-9_]*)=(.*)$`).FindAllStringSubmatch(example, -1) {
		documented[m[1]] = true
		if !strings.HasPrefix(m[0], "#") && strings.TrimSpace(m[2]) == "" {
			t.Errorf("env.example sets %s to an empty value, which replaces its default", m[1])
		}
	}
	want := []string{
		"TOLLGATE_NODE_ID", "TOLLGATE_JOIN", "TOLLGATE_BOOTSTRAP_EXPECT", "TOLLGATE_RAFT_ADVERTISE",
		"TOLLGATE_GOSSIP_ADVERTISE", "TOLLGATE_DRAIN_DELAY", "TOLLGATE_DRAIN_TIMEOUT",
		"TOLLGATE_ADMIN_TOKEN", "OPENAI_API_KEY",
	}
	// Every TOLLGATE_* variable named in the tollgate command's source.
	sources, err := filepath.Glob(filepath.Join("..", "cmd", "tollgate", "*.go"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("no sources in ../cmd/tollgate: %v", err)
	}
	envName := regexp.MustCompile(`"(TOLLGATE_[A-Z0-9_]+)"`)
	for _, src := range sources {
		if strings.HasSuffix(src, "_test.go") {
			continue
		}
		for _, m := range envName.FindAllStringSubmatch(readFile(t, src), -1) {
			want = append(want, m[1])
		}
	}
	for _, name := range want {
		if !documented[name] {
			t.Errorf("env.example does not document %s (add a commented %s=... line)", name, name)
		}
	}
}

func TestDockerfile(t *testing.T) {
	df := readFile(t, "Dockerfile")
	for _, want := range []string{
		"FROM golang:1.26-bookworm AS build",
		"CGO_ENABLED=0 go build -trimpath",
		"./cmd/tollgate ./cmd/tollctl",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"VOLUME /data",
		"EXPOSE 4000/tcp 4100/tcp 4200/tcp 4300/tcp 4300/udp",
		`ENTRYPOINT ["/tollgate", "--data-dir", "/data"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

type composeFile struct {
	Services map[string]struct {
		Build struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Image           string   `yaml:"image"`
		Command         []string `yaml:"command"`
		EnvFile         string   `yaml:"env_file"`
		Volumes         []string `yaml:"volumes"`
		StopGracePeriod string   `yaml:"stop_grace_period"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

func TestCompose(t *testing.T) {
	var c composeFile
	decodeYAML(t, "compose.yaml", &c)
	nodes := []string{"tollgate-1", "tollgate-2", "tollgate-3"}
	wantJoin := "--join=tollgate-1:4300,tollgate-2:4300,tollgate-3:4300"
	haproxyCfg := readFile(t, "compose-haproxy.cfg")
	for _, name := range nodes {
		s, ok := c.Services[name]
		if !ok {
			t.Errorf("compose.yaml: no service %s", name)
			continue
		}
		if df := filepath.Join(s.Build.Context, s.Build.Dockerfile); s.Build.Dockerfile == "" || !exists(df) {
			t.Errorf("%s: build.dockerfile %q (relative to context %q) does not exist", name, s.Build.Dockerfile, s.Build.Context)
		}
		for _, want := range []string{"--node-id=" + name, "--bootstrap-expect=3", wantJoin,
			"--raft-advertise=" + name + ":4200", "--gossip-advertise=" + name + ":4300"} {
			if !slices.Contains(s.Command, want) {
				t.Errorf("%s: command lacks %q: %q", name, want, s.Command)
			}
		}
		if s.EnvFile != "tollgate.env" {
			t.Errorf("%s: env_file %q, want tollgate.env (the shared admin token)", name, s.EnvFile)
		}
		if vol := name + "-data:/data"; !slices.Contains(s.Volumes, vol) {
			t.Errorf("%s: volumes %q lack %q", name, s.Volumes, vol)
		} else if _, ok := c.Volumes[name+"-data"]; !ok {
			t.Errorf("compose.yaml: volume %s-data is not declared", name)
		}
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if err != nil {
			t.Errorf("%s: stop_grace_period %q: %v", name, s.StopGracePeriod, err)
		}
		checkGrace(t, name+" stop_grace_period", grace, s.Command)
		if !regexp.MustCompile(`(?m)^\s*server\s+\S+\s+` + regexp.QuoteMeta(name) + `:4000\s`).MatchString(haproxyCfg) {
			t.Errorf("compose-haproxy.cfg has no server line for %s:4000", name)
		}
	}
	hp, ok := c.Services["haproxy"]
	if !ok {
		t.Fatal("compose.yaml: no haproxy service")
	}
	if !slices.Contains(hp.Volumes, "./compose-haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro") {
		t.Errorf("haproxy service does not mount compose-haproxy.cfg: %q", hp.Volumes)
	}
}

// Just the parts of the Kubernetes objects that the checks below look at.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		// Service
		ClusterIP                string `yaml:"clusterIP"`
		PublishNotReadyAddresses bool   `yaml:"publishNotReadyAddresses"`
		// A Service's selector is a map of labels; a StatefulSet's and a PodDisruptionBudget's
		// has them under matchLabels: see labels().
		Selector map[string]any `yaml:"selector"`
		Ports    []struct {
			Name     string `yaml:"name"`
			Port     int    `yaml:"port"`
			Protocol string `yaml:"protocol"`
		} `yaml:"ports"`
		// StatefulSet
		ServiceName         string `yaml:"serviceName"`
		Replicas            int    `yaml:"replicas"`
		PodManagementPolicy string `yaml:"podManagementPolicy"`
		Template            struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Args []string `yaml:"args"`
					Env  []struct {
						Name      string `yaml:"name"`
						ValueFrom struct {
							SecretKeyRef struct {
								Name string `yaml:"name"`
							} `yaml:"secretKeyRef"`
						} `yaml:"valueFrom"`
					} `yaml:"env"`
					ReadinessProbe probe         `yaml:"readinessProbe"`
					LivenessProbe  probe         `yaml:"livenessProbe"`
					VolumeMounts   []volumeMount `yaml:"volumeMounts"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
		// PodDisruptionBudget
		MaxUnavailable any `yaml:"maxUnavailable"`
	} `yaml:"spec"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

func TestKubernetes(t *testing.T) {
	objs := decodeK8s(t, filepath.Join("k8s", "tollgate.yaml"))
	kinds := map[string][]k8sObject{}
	for _, o := range objs {
		kinds[o.Kind] = append(kinds[o.Kind], o)
		wantAPI := map[string]string{"Service": "v1", "StatefulSet": "apps/v1", "PodDisruptionBudget": "policy/v1"}[o.Kind]
		if o.APIVersion != wantAPI {
			t.Errorf("%s %s: apiVersion %q, want %q", o.Kind, o.Metadata.Name, o.APIVersion, wantAPI)
		}
	}
	if len(kinds["StatefulSet"]) != 1 || len(kinds["Service"]) != 2 || len(kinds["PodDisruptionBudget"]) != 1 || len(objs) != 4 {
		t.Fatalf("k8s/tollgate.yaml: want 1 StatefulSet, 2 Services, 1 PodDisruptionBudget; got %d objects: %v", len(objs), kindCounts(kinds))
	}
	sts := kinds["StatefulSet"][0]
	labels := sts.Spec.Template.Metadata.Labels
	if sts.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("StatefulSet podManagementPolicy %q: want Parallel, or the pods never meet for --bootstrap-expect", sts.Spec.PodManagementPolicy)
	}
	if sel := matchLabels(sts); len(sel) == 0 || !subset(sel, labels) {
		t.Errorf("StatefulSet selector %v does not match its pod labels %v", sel, labels)
	}

	// The headless Service gives the pods the names used in --join and the advertise addresses.
	var headless, traffic *k8sObject
	for i, s := range kinds["Service"] {
		if s.Spec.ClusterIP == "None" {
			headless = &kinds["Service"][i]
		} else {
			traffic = &kinds["Service"][i]
		}
		if sel := stringMap(s.Spec.Selector); len(sel) == 0 || !subset(sel, labels) {
			t.Errorf("Service %s selector %v does not match the pod labels %v", s.Metadata.Name, sel, labels)
		}
	}
	if headless == nil || traffic == nil {
		t.Fatal("want one headless Service (clusterIP: None) and one traffic Service")
	}
	if !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service %s: publishNotReadyAddresses must be true (pods are not ready until the cluster forms)", headless.Metadata.Name)
	}
	if sts.Spec.ServiceName != headless.Metadata.Name {
		t.Errorf("StatefulSet serviceName %q, want the headless Service %q", sts.Spec.ServiceName, headless.Metadata.Name)
	}
	for _, p := range []string{"4100/TCP", "4200/TCP", "4300/TCP", "4300/UDP"} {
		if !hasPort(*headless, p) {
			t.Errorf("headless Service lacks port %s", p)
		}
	}
	for _, p := range []string{"4000/TCP", "4100/TCP"} {
		if !hasPort(*traffic, p) {
			t.Errorf("Service %s lacks port %s", traffic.Metadata.Name, p)
		}
	}

	if len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("StatefulSet: want one container, got %d", len(sts.Spec.Template.Spec.Containers))
	}
	ctr := sts.Spec.Template.Spec.Containers[0]
	n := sts.Spec.Replicas
	peers := make([]string, n)
	for i := range peers {
		peers[i] = sts.Metadata.Name + "-" + strconv.Itoa(i) + "." + headless.Metadata.Name + ":4300"
	}
	for _, want := range []string{
		"--node-id=$(POD_NAME)",
		"--bootstrap-expect=" + strconv.Itoa(n),
		"--join=" + strings.Join(peers, ","),
		"--raft-advertise=$(POD_NAME)." + headless.Metadata.Name + ".$(NAMESPACE).svc.cluster.local:4200",
		"--gossip-advertise=$(POD_NAME)." + headless.Metadata.Name + ".$(NAMESPACE).svc.cluster.local:4300",
	} {
		if !slices.Contains(ctr.Args, want) {
			t.Errorf("container args lack %q: %q", want, ctr.Args)
		}
	}
	checkGrace(t, "terminationGracePeriodSeconds", time.Duration(sts.Spec.Template.Spec.TerminationGracePeriodSeconds)*time.Second, ctr.Args)
	if ctr.ReadinessProbe.HTTPGet.Path != "/readyz" || ctr.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes: readiness %q, liveness %q; want /readyz and /healthz", ctr.ReadinessProbe.HTTPGet.Path, ctr.LivenessProbe.HTTPGet.Path)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || !slices.Contains(ctr.VolumeMounts,
		volumeMount{Name: sts.Spec.VolumeClaimTemplates[0].Metadata.Name, MountPath: "/data"}) {
		t.Error("the volumeClaimTemplate is not mounted at /data")
	}

	// The admin token comes from the Secret that secret.example.yaml shows.
	secret := decodeK8s(t, filepath.Join("k8s", "secret.example.yaml"))
	if len(secret) != 1 || secret[0].Kind != "Secret" || secret[0].APIVersion != "v1" {
		t.Fatalf("k8s/secret.example.yaml: want one v1 Secret, got %v", secret)
	}
	tokenFromSecret := false
	for _, e := range ctr.Env {
		if e.Name == "TOLLGATE_ADMIN_TOKEN" {
			tokenFromSecret = e.ValueFrom.SecretKeyRef.Name == secret[0].Metadata.Name
		}
	}
	if !tokenFromSecret {
		t.Errorf("TOLLGATE_ADMIN_TOKEN does not come from the Secret %q", secret[0].Metadata.Name)
	}

	pdb := kinds["PodDisruptionBudget"][0]
	if sel := matchLabels(pdb); pdb.Spec.MaxUnavailable != 1 || len(sel) == 0 || !subset(sel, labels) {
		t.Errorf("PodDisruptionBudget: maxUnavailable %v, selector %v; want 1 and the pod labels %v", pdb.Spec.MaxUnavailable, sel, labels)
	}
}

// checkGrace fails unless grace exceeds the drain delay plus the drain timeout, read from
// args when they set them, else Tollgate's defaults (--drain-delay auto is 5s in a cluster).
func checkGrace(t *testing.T, what string, grace time.Duration, args []string) {
	t.Helper()
	delay, timeout := defaultDrainDelay, defaultDrainTimeout
	for _, a := range args {
		for flag, p := range map[string]*time.Duration{"--drain-delay=": &delay, "--drain-timeout=": &timeout} {
			if v, ok := strings.CutPrefix(a, flag); ok && v != "auto" {
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Errorf("%s%s: %v", flag, v, err)
				}
				*p = d
			}
		}
	}
	if grace <= delay+timeout {
		t.Errorf("%s is %v: it must exceed drain-delay + drain-timeout (%v + %v), or in-flight requests are killed",
			what, grace, delay, timeout)
	}
}

func decodeYAML(t *testing.T, path string, v any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(readFile(t, path)), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// decodeK8s decodes every document of a multi-document YAML file.
func decodeK8s(t *testing.T, path string) []k8sObject {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, path)))
	var objs []k8sObject
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if o.Kind == "" {
			t.Fatalf("%s: a document without a kind", path)
		}
		objs = append(objs, o)
	}
}

// matchLabels returns spec.selector.matchLabels.
func matchLabels(o k8sObject) map[string]string {
	m, _ := o.Spec.Selector["matchLabels"].(map[string]any)
	return stringMap(m)
}

func stringMap(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		out[k] = s
	}
	return out
}

func hasPort(s k8sObject, want string) bool {
	for _, p := range s.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "TCP"
		}
		if strconv.Itoa(p.Port)+"/"+proto == want {
			return true
		}
	}
	return false
}

func subset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return true
}

func kindCounts(kinds map[string][]k8sObject) map[string]int {
	m := map[string]int{}
	for k, v := range kinds {
		m[k] = len(v)
	}
	return m
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
