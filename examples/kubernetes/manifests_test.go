package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbound-go/outbound/adapters/inventory"
	"github.com/outbound-go/outbound/adapters/payments"
	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/config/configcheck"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The systems of the bookstore, with their code defaults, and the names
// the manifests use.
var (
	systems       = []config.System{inventory.System, payments.System}
	configMapName = "bookstore-outbound"
	secretName    = "bookstore-outbound-secrets"
	envArgs       = []string{"env", "--system", "inventory", "--system", "payments", "--format", "configmap", "--name", configMapName}
)

// operatorOverrides are the settings the deployment sets, on purpose, to
// a value other than the code default, each with its reason. Every other
// setting in the pod must equal the code default.
var operatorOverrides = map[string]string{}

// Just what the test reads of the manifests.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	EnableServiceLinks *bool       `yaml:"enableServiceLinks"`
	InitContainers     []container `yaml:"initContainers"`
	Containers         []container `yaml:"containers"`
}

type container struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	EnvFrom []struct {
		ConfigMapRef *struct{ Name string } `yaml:"configMapRef"`
		SecretRef    *struct{ Name string } `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

// parse decodes every document of a manifest file.
func parse(t *testing.T, file string) []object {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []object
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if o.Kind == "" || o.APIVersion == "" || o.Metadata.Name == "" {
			t.Fatalf("%s: a document without kind, apiVersion or metadata.name", file)
		}
		out = append(out, o)
	}
	return out
}

func one(t *testing.T, file, kind string) object {
	t.Helper()
	for _, o := range parse(t, file) {
		if o.Kind == kind {
			return o
		}
	}
	t.Fatalf("%s: no %s", file, kind)
	return object{}
}

// TestConfigMapIsGenerated: configmap.yaml is byte for byte the output of
// `outbound env`, so a new setting or a changed baseline shows up here.
// Regenerate with:
//
//	go run ./cmd/outbound env --system inventory --system payments --format configmap --name bookstore-outbound > examples/kubernetes/configmap.yaml
func TestConfigMapIsGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs cmd/outbound")
	}
	// `go run` compiles cmd/outbound, which takes minutes on a cold build
	// cache and a busy machine: it is bounded by the test's own deadline
	// (go test -timeout), not by a guess of its own.
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-5*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "../../cmd/outbound"}, envArgs...)...)
	// OUTBOUND_SYSTEMS would add systems to the output.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, config.SystemsVar+"=") })
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("outbound env: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile("configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("configmap.yaml differs from `outbound %s`; regenerate it (see the test's doc).\ngot:\n%s\nwant:\n%s",
			strings.Join(envArgs, " "), got, want)
	}
}

// declared returns every variable the service reads: the registry's
// (OUTBOUND_*), each setting of each system and the list of its routes.
func declared() map[string]config.Var {
	out := map[string]config.Var{}
	vars := append(config.GlobalReference(), config.Reference(systems...)...)
	for _, v := range append(vars, config.RouteReference(systems...)...) {
		out[v.Name] = v
	}
	return out
}

func TestEveryVariableIsDeclared(t *testing.T) {
	known := declared()
	cm := one(t, "configmap.yaml", "ConfigMap")
	sec := one(t, "secret.yaml", "Secret")
	if cm.Metadata.Name != configMapName || sec.Metadata.Name != secretName {
		t.Errorf("names %q and %q, want %q and %q", cm.Metadata.Name, sec.Metadata.Name, configMapName, secretName)
	}
	if len(cm.Data) == 0 || len(sec.StringData) == 0 {
		t.Fatal("an empty ConfigMap or Secret")
	}
	for k := range cm.Data {
		v, ok := known[k]
		if !ok {
			t.Errorf("ConfigMap sets %s, which the service does not declare", k)
		}
		if v.Secret {
			t.Errorf("ConfigMap sets %s, a secret: it belongs in the Secret", k)
		}
	}
	for k := range sec.StringData {
		v, ok := known[k]
		if !ok {
			t.Errorf("Secret sets %s, which the service does not declare", k)
		} else if !v.Secret {
			t.Errorf("Secret sets %s, which is not secret: it belongs in the ConfigMap", k)
		}
	}
	for _, v := range known {
		// The systems' secrets (BASE_URL) are required; the registry's
		// (OUTBOUND_FLEET_REDIS_URL) is not: the bookstore runs no fleet.
		if v.Secret && v.System != "" {
			if _, ok := sec.StringData[v.Name]; !ok {
				t.Errorf("Secret lacks %s", v.Name)
			}
		}
	}
	// The commented-out defaults name declared, non-secret variables too:
	// uncommenting one must never introduce a typo or a secret.
	raw, err := os.ReadFile("configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	commented := 0
	for _, line := range strings.Split(string(raw), "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(line, "  # "), ":")
		if !ok || !strings.HasPrefix(line, "  # ") || strings.Contains(name, " ") {
			continue
		}
		commented++
		if v, ok := known[name]; !ok || v.Secret {
			t.Errorf("ConfigMap lists %s, which the service does not declare as a non-secret variable", name)
		}
	}
	if commented == 0 {
		t.Error("the ConfigMap lists no commented-out defaults")
	}
	if got := cm.Data[config.SystemsVar]; got != "inventory,payments" {
		t.Errorf("%s = %q, want inventory,payments", config.SystemsVar, got)
	}
	for _, c := range containers(t) {
		for _, e := range c.Env {
			if _, ok := known[e.Name]; !ok {
				t.Errorf("container %s sets %s, which the service does not declare", c.Name, e.Name)
			}
		}
	}
}

func containers(t *testing.T) []container {
	t.Helper()
	spec := one(t, "deployment.yaml", "Deployment").Spec.Template.Spec
	return append(slices.Clone(spec.InitContainers), spec.Containers...)
}

// TestCodeDefaultsSurvive: the environment wins over code defaults, so
// nothing in the pod may set a setting to anything but its code default
// (or an intended operator override); the generated ConfigMap lists the
// baseline commented out for that reason. Otherwise payments would run
// with a 10s read timeout instead of its 20s. The pod's environment loads
// cleanly as the service declares its systems, and the initContainer's
// check passes it.
func TestCodeDefaultsSurvive(t *testing.T) {
	cm := one(t, "configmap.yaml", "ConfigMap")
	sec := one(t, "secret.yaml", "Secret")
	for _, c := range containers(t) {
		t.Run(c.Name, func(t *testing.T) {
			env := effectiveEnv(t, c, cm, sec)
			for _, v := range config.Reference(systems...) {
				want, override := operatorOverrides[v.Name]
				if !override {
					want = v.Default
				}
				if got, ok := env[v.Name]; ok && got != want && !v.Secret {
					t.Errorf("%s = %q in the pod, but the code default is %q (an intended override goes in operatorOverrides)",
						v.Name, got, v.Default)
				}
			}
			loaded, err := config.LoadEnv(env, systems...)
			if err != nil {
				t.Fatalf("the service's load of the pod's environment: %v", err)
			}
			if len(loaded) != len(systems) {
				t.Errorf("%d systems loaded, want %d", len(loaded), len(systems))
			}
			for _, l := range loaded {
				if l.Name == payments.Name && l.Client.ReadTimeout != 20*time.Second {
					t.Errorf("payments read timeout %v, want 20s (its code default)", l.Client.ReadTimeout)
				}
			}
			if code, out := initCheck(t, env); code != configcheck.ExitValid {
				t.Errorf("the initContainer's check: exit %d, want 0:\n%s", code, out)
			}
		})
	}
}

// initCheck runs the initContainer's check over env, as its command
// (`/bookstore check-config`, see TestDeployment) does: the service's main
// calls configcheck.Main with its systems (examples/bookstore's
// TestCheckConfigCommand runs that command line itself).
func initCheck(t *testing.T, env map[string]string) (code int, out string) {
	t.Helper()
	var b bytes.Buffer
	code = configcheck.Command{Name: "bookstore check-config", Systems: systems, Env: env, Stdout: &b, Stderr: &b}.Run(t.Context(), nil)
	return code, b.String()
}

// podEnv is the environment of the Deployment's init container.
func podEnv(t *testing.T) map[string]string {
	t.Helper()
	spec := one(t, "deployment.yaml", "Deployment").Spec.Template.Spec
	return effectiveEnv(t, spec.InitContainers[0], one(t, "configmap.yaml", "ConfigMap"), one(t, "secret.yaml", "Secret"))
}

// TestInitContainerKnowsTheCodeDefaults: PAYMENTS_CALL_TIMEOUT=15s passes
// `outbound check` (baseline read 10s) but not the service, whose code
// reads payments for 20s; the initContainer runs the service's own check,
// which stops the pod on it before the service starts.
func TestInitContainerKnowsTheCodeDefaults(t *testing.T) {
	env := podEnv(t)
	env["PAYMENTS_CALL_TIMEOUT"] = "15s"
	if _, err := config.LoadEnv(env, config.System{Name: "inventory"}, config.System{Name: "payments"}); err != nil {
		t.Fatalf("at the baseline (what outbound check sees), 15s should pass: %v", err)
	}
	code, out := initCheck(t, env)
	want := "PAYMENTS_CALL_TIMEOUT=15s: must be >= CONNECT_TIMEOUT + READ_TIMEOUT + 1s (= 23s; CONNECT_TIMEOUT = 2s, baseline default; READ_TIMEOUT = 20s, code default)"
	if code != configcheck.ExitInvalid || !strings.Contains(out, want) {
		t.Errorf("the initContainer's check: exit %d, want 1 with %q:\n%s", code, want, out)
	}
}

// TestServiceLinksStopNothing: the variables Kubernetes injects for a
// Service named like a system, or starting like it ("payments-eu"), are
// ignored by the check and listed as not outbound's; the README says so
// rather than that they stop the pod.
func TestServiceLinksStopNothing(t *testing.T) {
	env := podEnv(t)
	for k, v := range map[string]string{
		"PAYMENTS_EU_SERVICE_HOST": "10.0.0.9", "PAYMENTS_EU_SERVICE_PORT": "443", "PAYMENTS_EU_PORT": "tcp://10.0.0.9:443",
		"PAYMENTS_EU_PORT_443_TCP_ADDR": "10.0.0.9", "INVENTORY_SERVICE_HOST": "10.0.0.8", "INVENTORY_PORT_8080_TCP_PORT": "8080",
	} {
		env[k] = v
	}
	code, out := initCheck(t, env)
	if code != configcheck.ExitValid || !strings.Contains(out, "not outbound's, ignored: PAYMENTS_EU_PORT, PAYMENTS_EU_PORT_443_TCP_ADDR, PAYMENTS_EU_SERVICE_HOST, PAYMENTS_EU_SERVICE_PORT\n") {
		t.Errorf("service links: exit %d, want 0 with them listed as ignored:\n%s", code, out)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	if strings.Contains(text, "stops the pod at start") || !strings.Contains(text, "PAYMENTS_EU_SERVICE_HOST") {
		t.Errorf("the README must name PAYMENTS_EU_SERVICE_HOST as ignored, not as stopping the pod")
	}
}

// effectiveEnv is the environment of container c: envFrom in order, then
// env, each later one winning, as Kubernetes does.
func effectiveEnv(t *testing.T, c container, cm, sec object) map[string]string {
	t.Helper()
	env := map[string]string{}
	var sawCM, sawSecret bool
	for _, f := range c.EnvFrom {
		switch {
		case f.ConfigMapRef != nil && f.ConfigMapRef.Name == cm.Metadata.Name:
			sawCM = true
			for k, v := range cm.Data {
				env[k] = v
			}
		case f.SecretRef != nil && f.SecretRef.Name == sec.Metadata.Name:
			sawSecret = true
			for k, v := range sec.StringData {
				env[k] = v
			}
		default:
			t.Errorf("container %s: envFrom names an unknown source", c.Name)
		}
	}
	if !sawCM || !sawSecret {
		t.Errorf("container %s: envFrom lacks the ConfigMap or the Secret", c.Name)
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

func TestDeployment(t *testing.T) {
	spec := one(t, "deployment.yaml", "Deployment").Spec.Template.Spec
	one(t, "deployment.yaml", "Service")
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("enableServiceLinks must be false: service-link variables share the systems' prefixes")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	// The check is the service's own binary: it knows the code defaults.
	if len(spec.InitContainers) != 1 || len(c.Command) == 0 ||
		!slices.Equal(spec.InitContainers[0].Command, []string{c.Command[0], "check-config"}) {
		t.Errorf("init containers %+v, want one running %q check-config", spec.InitContainers, c.Command)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("the readiness probe must GET /readyz")
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("the liveness probe must GET /healthz")
	}
	for _, k := range []string{"cpu", "memory"} {
		if c.Resources.Requests[k] == "" {
			t.Errorf("no %s request", k)
		}
	}
	if c.Resources.Limits["memory"] == "" {
		t.Error("no memory limit")
	}
	// The check must see what the service sees.
	ic := spec.InitContainers[0]
	if !slices.EqualFunc(ic.Env, c.Env, func(a, b struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	}) bool {
		return a == b
	}) || len(ic.EnvFrom) != len(c.EnvFrom) {
		t.Error("the init container's environment differs from the service's")
	}
}

// TestReadmeSaysTheConfigMapValuesAreCommentedOut: the README describes
// the ConfigMap as it is. Every value but OUTBOUND_SYSTEMS is commented
// out, so the README must say so and must not claim that the ConfigMap
// pins the baseline values.
func TestReadmeSaysTheConfigMapValuesAreCommentedOut(t *testing.T) {
	cm, err := os.ReadFile("configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(cm, &m); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	if len(m.Data) == 1 {
		if strings.Contains(text, "pins the baseline values") || !strings.Contains(text, "commented out") {
			t.Errorf("configmap.yaml sets only %v, but the README does not say its values are commented out", m.Data)
		}
	}
}
