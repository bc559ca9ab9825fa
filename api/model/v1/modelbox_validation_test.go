package v1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// The schema (OpenAPI and CEL rules in the CRD) is ModelBox's admission
// validation: these tests send what a user would write to a real apiserver
// and check that each bad spec is refused with a message naming the field.
func TestSchemaRefusesBadSpecs(t *testing.T) {
	ns := env.Namespace(t)
	tests := map[string]struct {
		name string // metadata.name; "box" when empty
		spec string
		// want are substrings of the error; none means the spec is accepted.
		want []string
	}{
		"the seed's sample": {spec: `
name: nginx
image: nginx:1.28.0
replicas: 4
rollingUpdate: 30%
ports:
- port: 80
  targetPort: 80
  nodePort: 30010`},
		"everything": {spec: `
image: nginx
size: medium
serviceType: LoadBalancer
rollingUpdate: 2
ports:
- {name: http, port: 80, nodePort: 30080}
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53, protocol: TCP}
envs: [{name: A, value: b}]
initContainers: [{name: init, image: busybox}]
sidecars: [{name: log, image: busybox}]
probes: {readiness: {httpGet: {path: /, port: 80}}}
autoscaling: {minReplicas: 2, maxReplicas: 5}`},
		"custom with resources": {spec: `
image: nginx
size: custom
resources: {requests: {cpu: 100m}}`},
		"probes off": {spec: `{image: nginx, probes: {disabled: true}}`},
		"seed 003's ServicePorts: named targetPort and probe port, minReadySeconds": {spec: `
image: nginx
minReadySeconds: 3
ports:
- {name: web, port: 80, targetPort: http}
- {name: http, port: 8080, appProtocol: kubernetes.io/h2c}
probes:
  readiness: {httpGet: {path: /, port: http}}
  liveness: {tcpSocket: {port: 8080}, successThreshold: 1}
  startup: {grpc: {port: 8080}}`},
		"relaxed env names, valueFrom": {spec: `
image: nginx
envs:
- {name: my.env-name, value: x}
- {name: "with space", value: "y"}
- {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}`},
		"init container and sidecar, custom resources within limits": {spec: `
image: nginx
size: custom
resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {cpu: 1, memory: 1Gi}}
initContainers: [{name: init, image: busybox}]
sidecars: [{name: log, image: busybox, ports: [{name: metrics, containerPort: 9100}]}]`},

		"no image":    {spec: `{replicas: 1}`, want: []string{"spec.image: Required value"}},
		"empty image": {spec: `{image: ""}`, want: []string{"spec.image", "at least 1 chars"}},
		"duplicate ports": {
			spec: `{image: nginx, ports: [{name: a, port: 80}, {name: b, port: 80}]}`,
			want: []string{"spec.ports[1]: Duplicate value"},
		},
		"duplicate port names": {
			spec: `{image: nginx, ports: [{name: web, port: 80}, {name: web, port: 81}]}`,
			want: []string{"spec.ports: Invalid value", "port names must be unique"},
		},
		"unnamed ports": {
			spec: `{image: nginx, ports: [{port: 80}, {port: 81}]}`,
			want: []string{"spec.ports", "every port needs a name"},
		},
		"nodePort with ClusterIP": {
			spec: `{image: nginx, serviceType: ClusterIP, ports: [{port: 80, nodePort: 30010}]}`,
			want: []string{"spec.ports", "nodePort needs serviceType NodePort or LoadBalancer"},
		},
		"nodePort out of range": {
			spec: `{image: nginx, ports: [{port: 80, nodePort: 8080}]}`,
			want: []string{"spec.ports[0].nodePort", "greater than or equal to 30000"},
		},
		"duplicate nodePorts": {
			spec: `{image: nginx, ports: [{name: a, port: 80, nodePort: 30010}, {name: b, port: 81, nodePort: 30010}]}`,
			want: []string{"spec.ports", "nodePorts must be unique"},
		},
		"port name too long": {
			spec: `{image: nginx, ports: [{name: a-very-long-port-name, port: 80}]}`,
			want: []string{"spec.ports[0].name", "may not be more than 15"},
		},
		"rollingUpdate with a space": {
			spec: `{image: nginx, rollingUpdate: "30 %"}`,
			// The field and the rule's message; the value shown is the
			// apiserver's rendering: "30 %" from 1.35, "" on 1.34 (make test-compat).
			want: []string{`spec.rollingUpdate: Invalid value: `, `percentage from 1% to 100% such as "30%"`},
		},
		"rollingUpdate zero": {
			spec: `{image: nginx, rollingUpdate: 0}`,
			want: []string{"spec.rollingUpdate", "must be a positive count"},
		},
		"rollingUpdate above 100%": {
			spec: `{image: nginx, rollingUpdate: 101%}`,
			want: []string{"spec.rollingUpdate", "must be a positive count"},
		},
		"custom without resources": {
			spec: `{image: nginx, size: custom}`,
			want: []string{"spec.resources", "resources is required when size is custom"},
		},
		"preset with resources": {
			spec: `{image: nginx, size: small, resources: {limits: {cpu: "1"}}}`,
			want: []string{"spec.resources", "resources can only be given with size custom"},
		},
		"unknown size": {
			spec: `{image: nginx, size: huge}`,
			want: []string{"spec.size", `supported values: "small", "medium", "large", "custom"`},
		},
		"unknown service type": {
			spec: `{image: nginx, serviceType: ExternalName}`,
			want: []string{"spec.serviceType", "supported values"},
		},
		"replicas with autoscaling": {
			spec: `{image: nginx, replicas: 2, autoscaling: {maxReplicas: 3}}`,
			want: []string{"spec.replicas", "cannot be set together with autoscaling"},
		},
		"min above max": {
			spec: `{image: nginx, autoscaling: {minReplicas: 4, maxReplicas: 3}}`,
			want: []string{"spec.autoscaling.minReplicas", "must not exceed maxReplicas"},
		},
		"probes off and given": {
			spec: `{image: nginx, probes: {disabled: true, liveness: {tcpSocket: {port: 80}}}}`,
			want: []string{"spec.probes", "disabled turns every probe off"},
		},
		"duplicate sidecars": {
			spec: `{image: nginx, sidecars: [{name: a, image: x}, {name: a, image: y}]}`,
			want: []string{"spec.sidecars[1]: Duplicate value"},
		},
		"duplicate envs": {
			spec: `{image: nginx, envs: [{name: A, value: x}, {name: A, value: y}]}`,
			want: []string{"spec.envs[1]: Duplicate value"},
		},
		"sidecar named like the application": {
			spec: `{image: nginx, sidecars: [{name: box, image: x}]}`,
			want: []string{"spec.sidecars", "a sidecar cannot take the application container's name"},
		},
		"init container named like the application": {
			spec: `{image: nginx, name: app, initContainers: [{name: app, image: busybox}]}`,
			want: []string{"spec.initContainers", "an init container cannot take the application container's name"},
		},
		"name unfit for a Service": {
			name: "9box",
			spec: `{image: nginx}`,
			want: []string{"metadata.name names the Service"},
		},
		"serviceType without ports": {
			spec: `{image: nginx, serviceType: LoadBalancer}`,
			want: []string{"spec.serviceType", "serviceType needs ports"},
		},
		"named targetPort naming no port": {
			spec: `{image: nginx, ports: [{name: web, port: 80, targetPort: http}]}`,
			want: []string{"spec.ports", "a named targetPort must be the name of another port"},
		},
		"named targetPort naming a port of another protocol": {
			spec: `{image: nginx, ports: [{name: web, port: 80, targetPort: dns}, {name: dns, port: 53, protocol: UDP}]}`,
			want: []string{"spec.ports", "a named targetPort must be the name of another port"},
		},
		"named targetPort naming a named targetPort": {
			spec: `{image: nginx, ports: [{name: a, port: 80, targetPort: b}, {name: b, port: 81, targetPort: a}]}`,
			want: []string{"spec.ports", "a named targetPort must be the name of another port"},
		},
		"targetPort that is no port name": {
			spec: `{image: nginx, ports: [{port: 80, targetPort: "HTTP_1"}]}`,
			want: []string{"spec.ports[0].targetPort", "must be a port number from 1 to 65535 or a port name"},
		},
		"targetPort out of range": {
			spec: `{image: nginx, ports: [{port: 80, targetPort: 70000}]}`,
			want: []string{"spec.ports[0].targetPort", "must be a port number from 1 to 65535"},
		},
		"port name with two hyphens": {
			spec: `{image: nginx, ports: [{name: a--b, port: 80}]}`,
			want: []string{"spec.ports[0].name", "must contain a letter and no '--'"},
		},
		"port name without a letter": {
			spec: `{image: nginx, ports: [{name: "8080", port: 80}]}`,
			want: []string{"spec.ports[0].name", "must contain a letter"},
		},
		"appProtocol that is no qualified name": {
			spec: `{image: nginx, ports: [{port: 80, appProtocol: "h2c!"}]}`,
			want: []string{"spec.ports[0].appProtocol", "should match"},
		},
		"minReadySeconds negative": {
			spec: `{image: nginx, minReadySeconds: -1}`,
			want: []string{"spec.minReadySeconds", "greater than or equal to 0"},
		},
		"probe on a port name the container does not have": {
			spec: `{image: nginx, ports: [{name: http, port: 80}], probes: {readiness: {httpGet: {path: /, port: admin}}}}`,
			want: []string{"spec.probes.readiness", "a named probe port must be the name of a port in spec.ports"},
		},
		"probe on a named port without any ports": {
			spec: `{image: nginx, probes: {liveness: {tcpSocket: {port: http}}}}`,
			want: []string{"spec.probes.liveness", "a named probe port must be the name of a port in spec.ports"},
		},
		"probe on a port that leads elsewhere by name": {
			spec: `{image: nginx, ports: [{name: web, port: 80, targetPort: http}, {name: http, port: 8080}], probes: {startup: {tcpSocket: {port: web}}}}`,
			want: []string{"spec.probes.startup", "a named probe port must be the name of a port in spec.ports"},
		},
		"probe without a handler": {
			spec: `{image: nginx, probes: {readiness: {periodSeconds: 5}}}`,
			want: []string{"spec.probes.readiness", "a probe needs exactly one of exec, httpGet, tcpSocket or grpc"},
		},
		"probe with two handlers": {
			spec: `{image: nginx, probes: {readiness: {tcpSocket: {port: 80}, exec: {command: ["true"]}}}}`,
			want: []string{"spec.probes.readiness", "a probe needs exactly one of"},
		},
		"probe port out of range": {
			spec: `{image: nginx, probes: {startup: {grpc: {port: 0}}}}`,
			want: []string{"spec.probes.startup", "probe ports are from 1 to 65535"},
		},
		"negative probe period": {
			spec: `{image: nginx, probes: {readiness: {tcpSocket: {port: 80}, periodSeconds: -1}}}`,
			want: []string{"spec.probes.readiness", "cannot be negative"},
		},
		"liveness successThreshold above 1": {
			spec: `{image: nginx, probes: {liveness: {tcpSocket: {port: 80}, successThreshold: 2}}}`,
			want: []string{"spec.probes.liveness", "successThreshold must be 1"},
		},
		"empty env name": {
			spec: `{image: nginx, envs: [{name: "", value: x}]}`,
			want: []string{"spec.envs", "env names cannot be empty"},
		},
		"env with value and valueFrom": {
			spec: `{image: nginx, envs: [{name: A, value: x, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]}`,
			want: []string{"spec.envs", "an env with valueFrom has no value and exactly one of"},
		},
		"env valueFrom without a source": {
			spec: `{image: nginx, envs: [{name: A, valueFrom: {}}]}`,
			want: []string{"spec.envs", "an env with valueFrom has no value and exactly one of"},
		},
		"request above its limit": {
			spec: `{image: nginx, size: custom, resources: {requests: {cpu: "2"}, limits: {cpu: 1500m}}}`,
			want: []string{"spec.resources", "a cpu or memory request cannot exceed its limit"},
		},
		"init container without an image": {
			spec: `{image: nginx, initContainers: [{name: init}]}`,
			want: []string{"spec.initContainers", "every container needs an image"},
		},
		"sidecar mounting a volume": {
			spec: `{image: nginx, sidecars: [{name: log, image: busybox, volumeMounts: [{name: data, mountPath: /data}]}]}`,
			want: []string{"spec.sidecars", "a ModelBox's pods have no volumes"},
		},
		"every rule's problem at once": {
			spec: `{image: nginx, size: custom, rollingUpdate: "30 %", serviceType: ClusterIP, ports: [{port: 80, nodePort: 30010}]}`,
			want: []string{"spec.resources", "spec.rollingUpdate", "spec.ports"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			box := &unstructured.Unstructured{}
			box.SetAPIVersion("model.deckhand.dev/v1")
			box.SetKind("ModelBox")
			box.SetNamespace(ns)
			box.SetName(tt.name)
			if tt.name == "" {
				box.SetName("box")
			}
			spec := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.spec), &spec); err != nil {
				t.Fatalf("bad test spec: %v", err)
			}
			box.Object["spec"] = spec

			err := env.Client.Create(context.Background(), box)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("valid spec refused: %v", err)
				}
				_ = env.Client.Delete(context.Background(), box)
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// The samples users copy from must pass the schema.
func TestSamplesAreValid(t *testing.T) {
	ns := env.Namespace(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	samples, err := filepath.Glob(filepath.Join(root, "config", "samples", "model_v1_*.yaml"))
	if err != nil || len(samples) < 2 {
		t.Fatalf("want the ModelBox samples, found %v (%v)", samples, err)
	}
	for _, path := range samples {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		box := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &box.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		box.SetNamespace(ns)
		if err := env.Client.Create(context.Background(), box, client.DryRunAll); err != nil {
			t.Errorf("%s: %v", filepath.Base(path), err)
		}
	}
}
