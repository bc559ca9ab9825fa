package modelbox

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestChildrenGolden builds every child of each testdata/<case>.yaml
// ModelBox and compares them with testdata/<case>.golden.yaml. After a
// deliberate change, `go test ./internal/controller/modelbox -run Golden -update`
// rewrites the golden files; review their diff.
func TestChildrenGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden.yaml") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			box := readBox(t, in)
			kids, err := desiredFor(box, nil)
			if err != nil {
				t.Fatal(err)
			}
			var docs []string
			for _, obj := range []any{kids.deployment, kids.service, kids.hpa, kids.pdb} {
				if isNil(obj) {
					continue
				}
				data, err := yaml.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, string(data))
			}
			got := strings.Join(docs, "---\n")
			golden := strings.TrimSuffix(in, ".yaml") + ".golden.yaml"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("children differ from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

func isNil(obj any) bool {
	v := reflect.ValueOf(obj)
	return obj == nil || (v.Kind() == reflect.Pointer && v.IsNil())
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func readBox(t *testing.T, path string) *modelv1.ModelBox {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	box := &modelv1.ModelBox{}
	if err := yaml.UnmarshalStrict(data, box); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return box
}

func TestResourcesOf(t *testing.T) {
	custom := &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: mustQuantity("1Gi")}}
	tests := map[string]struct {
		size      modelv1.Size
		resources *corev1.ResourceRequirements
		want      corev1.ResourceRequirements
	}{
		"nothing given is small": {want: presets[modelv1.SizeSmall]},
		"small":                  {size: modelv1.SizeSmall, want: requirements("100m", "128Mi", "500m", "256Mi")},
		"medium":                 {size: modelv1.SizeMedium, want: requirements("250m", "512Mi", "1", "1Gi")},
		"large":                  {size: modelv1.SizeLarge, want: requirements("1", "2Gi", "2", "4Gi")},
		"custom":                 {size: modelv1.SizeCustom, resources: custom, want: *custom},
		"resources without size": {resources: custom, want: *custom},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			box := &modelv1.ModelBox{Spec: modelv1.ModelBoxSpec{Size: tt.size, Resources: tt.resources}}
			if diff := cmp.Diff(tt.want.String(), resourcesOf(box).String()); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestProbesFor(t *testing.T) {
	http := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
	tcp := func(port int32) *corev1.TCPSocketAction { return &corev1.TCPSocketAction{Port: intstr.FromInt32(port)} }
	tests := map[string]struct {
		ports  []modelv1.ServicePort
		probes *modelv1.Probes
		// want* are the probes' TCP ports, 0 for an HTTP probe, -1 for none.
		wantReadiness, wantLiveness, wantStartup int32
	}{
		"defaults on the first port": {
			ports:         []modelv1.ServicePort{{Port: 80, TargetPort: ptr.To(intstr.FromInt32(8080))}, {Port: 81}},
			wantReadiness: 8080, wantLiveness: 8080, wantStartup: -1,
		},
		"defaults skip UDP ports": {
			ports:         []modelv1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}, {Port: 8053}},
			wantReadiness: 8053, wantLiveness: 8053, wantStartup: -1,
		},
		"no ports, no defaults": {wantReadiness: -1, wantLiveness: -1, wantStartup: -1},
		"a given readiness probe replaces only its default": {
			ports:         []modelv1.ServicePort{{Port: 80}},
			probes:        &modelv1.Probes{Readiness: http, Startup: http},
			wantReadiness: 0, wantLiveness: 80, wantStartup: 0,
		},
		"disabled": {
			ports:         []modelv1.ServicePort{{Port: 80}},
			probes:        &modelv1.Probes{Disabled: true},
			wantReadiness: -1, wantLiveness: -1, wantStartup: -1,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			box := &modelv1.ModelBox{Spec: modelv1.ModelBoxSpec{Ports: tt.ports, Probes: tt.probes}}
			readiness, liveness, startup, err := probesFor(box)
			if err != nil {
				t.Fatal(err)
			}
			got := [3]int32{}
			for i, p := range []*corev1.Probe{toProbe(t, readiness), toProbe(t, liveness), toProbe(t, startup)} {
				switch {
				case p == nil:
					got[i] = -1
				case p.TCPSocket != nil:
					if diff := cmp.Diff(tcp(p.TCPSocket.Port.IntVal), p.TCPSocket); diff != "" {
						t.Error(diff)
					}
					got[i] = p.TCPSocket.Port.IntVal
				}
			}
			if want := [3]int32{tt.wantReadiness, tt.wantLiveness, tt.wantStartup}; got != want {
				t.Errorf("probes (readiness, liveness, startup) = %v, want %v", got, want)
			}
		})
	}
}

func TestServiceTypeOf(t *testing.T) {
	tests := map[string]struct {
		spec modelv1.ModelBoxSpec
		want corev1.ServiceType
	}{
		"default":                   {want: corev1.ServiceTypeClusterIP},
		"a nodePort means NodePort": {spec: modelv1.ModelBoxSpec{Ports: []modelv1.ServicePort{{Port: 80, NodePort: 30010}}}, want: corev1.ServiceTypeNodePort},
		"explicit wins":             {spec: modelv1.ModelBoxSpec{ServiceType: corev1.ServiceTypeLoadBalancer, Ports: []modelv1.ServicePort{{Port: 80, NodePort: 30010}}}, want: corev1.ServiceTypeLoadBalancer},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := serviceTypeOf(&modelv1.ModelBox{Spec: tt.spec}); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPDBOnlyAboveOnePod(t *testing.T) {
	tests := map[string]struct {
		spec    modelv1.ModelBoxSpec
		current *int32 // the Deployment's replicas
		want    bool
	}{
		"new, no replicas":                   {want: false},
		"two replicas":                       {spec: modelv1.ModelBoxSpec{Replicas: ptr.To[int32](2)}, want: true},
		"one replica, though eight run":      {spec: modelv1.ModelBoxSpec{Replicas: ptr.To[int32](1)}, current: ptr.To[int32](8), want: false},
		"no replicas, eight run":             {current: ptr.To[int32](8), want: true},
		"no replicas, one runs":              {current: ptr.To[int32](1), want: false},
		"autoscaling from one":               {spec: modelv1.ModelBoxSpec{Autoscaling: &modelv1.Autoscaling{MaxReplicas: 5}}, want: false},
		"autoscaling from two":               {spec: modelv1.ModelBoxSpec{Autoscaling: &modelv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 5}}, want: true},
		"autoscaling from one, though 4 run": {spec: modelv1.ModelBoxSpec{Autoscaling: &modelv1.Autoscaling{MaxReplicas: 5}}, current: ptr.To[int32](4), want: false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := pdbFor(&modelv1.ModelBox{Spec: tt.spec}, tt.current) != nil; got != tt.want {
				t.Errorf("PDB = %v, want %v", got, tt.want)
			}
		})
	}
}

func toProbe(t *testing.T, ac any) *corev1.Probe {
	t.Helper()
	if isNil(ac) {
		return nil
	}
	data, err := yaml.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) == "null\n" {
		return nil
	}
	p := &corev1.Probe{}
	if err := yaml.Unmarshal(data, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAppPortsFor(t *testing.T) {
	named := func(name string) *intstr.IntOrString { return ptr.To(intstr.FromString(name)) }
	number := func(n int32) *intstr.IntOrString { return ptr.To(intstr.FromInt32(n)) }
	tests := map[string]struct {
		ports  []modelv1.ServicePort
		probes *modelv1.Probes
		want   []corev1.ContainerPort // protocol TCP unless given
		err    string
	}{
		"one per port": {
			ports: []modelv1.ServicePort{{Name: "http", Port: 80, TargetPort: number(8080)}, {Name: "admin", Port: 9000}},
			want:  []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "admin", ContainerPort: 9000}},
		},
		"a named targetPort adds no container port": {
			ports: []modelv1.ServicePort{{Name: "web", Port: 80, TargetPort: named("http")}, {Name: "http", Port: 8080}},
			want:  []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		},
		"a shared container port keeps the first name": {
			ports: []modelv1.ServicePort{{Name: "a", Port: 80, TargetPort: number(8080)}, {Name: "b", Port: 81, TargetPort: number(8080)}},
			want:  []corev1.ContainerPort{{Name: "a", ContainerPort: 8080}},
		},
		"a shared container port takes the name a targetPort refers to": {
			ports: []modelv1.ServicePort{{Name: "a", Port: 80, TargetPort: number(8080)}, {Name: "b", Port: 81, TargetPort: number(8080)},
				{Name: "c", Port: 82, TargetPort: named("b")}},
			want: []corev1.ContainerPort{{Name: "b", ContainerPort: 8080}},
		},
		"a shared container port takes the name a probe refers to": {
			ports:  []modelv1.ServicePort{{Name: "a", Port: 80, TargetPort: number(8080)}, {Name: "b", Port: 81, TargetPort: number(8080)}},
			probes: &modelv1.Probes{Liveness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("b")}}}},
			want:   []corev1.ContainerPort{{Name: "b", ContainerPort: 8080}},
		},
		"UDP and TCP on one number are two ports": {
			ports: []modelv1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53}},
			want:  []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", ContainerPort: 53}},
		},
		"two referred names on one container port": {
			ports: []modelv1.ServicePort{{Name: "a", Port: 80, TargetPort: number(8080)}, {Name: "b", Port: 81, TargetPort: number(8080)},
				{Name: "c", Port: 82, TargetPort: named("a")}, {Name: "d", Port: 83, TargetPort: named("b")}},
			err: `spec.ports[1].name: "b" and "a" (spec.ports[0]) are both referred to by name but lead to the same container port 8080/TCP`,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := appPortsFor(&modelv1.ModelBox{Spec: modelv1.ModelBoxSpec{Ports: tt.ports, Probes: tt.probes}})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ports []corev1.ContainerPort
			for _, cp := range got {
				ports = append(ports, corev1.ContainerPort{Name: ptr.Deref(cp.Name, ""), ContainerPort: *cp.ContainerPort, Protocol: *cp.Protocol})
			}
			for i := range tt.want {
				if tt.want[i].Protocol == "" {
					tt.want[i].Protocol = corev1.ProtocolTCP
				}
			}
			if diff := cmp.Diff(tt.want, ports); diff != "" {
				t.Errorf("container ports (-want +got):\n%s", diff)
			}
		})
	}
}
