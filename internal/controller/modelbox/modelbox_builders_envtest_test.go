package modelbox_test

import (
	"testing"

	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// Every spec the schema admits must build children the apiserver accepts:
// otherwise a ModelBox passes admission only to sit Degraded. Each spec
// here is admitted, then its children are applied with a server-side dry
// run, which runs the apiserver's full Deployment and Service validation.
func TestAdmittedSpecsBuildValidChildren(t *testing.T) {
	ns := env.Namespace(t)
	specs := map[string]string{
		"seed": `{name: nginx, image: nginx:1.7.9, replicas: 4, rollingUpdate: 30%, ports: [{port: 80, targetPort: 80, nodePort: 30020}]}`,
		"seed 003's named targetPort and probe port": `
image: nginx
minReadySeconds: 0
serviceType: LoadBalancer
ports:
- {name: web, port: 80, targetPort: http}
- {name: http, port: 8080, appProtocol: kubernetes.io/h2c}
- {name: alt, port: 8081, targetPort: 8080}
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53}
probes:
  readiness: {httpGet: {path: /, port: http}}
  liveness: {tcpSocket: {port: 8080}, successThreshold: 1}
  startup: {grpc: {port: 8080}}`,
		"envs, resources, init container, sidecar": `
image: nginx
size: custom
resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {cpu: 1, memory: 1Gi}}
envs:
- {name: my.env-name, value: x}
- {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
initContainers: [{name: init, image: busybox}, {name: proxy, image: envoy, restartPolicy: Always}]
sidecars: [{name: log, image: busybox, ports: [{name: metrics, containerPort: 9100}]}]
autoscaling: {minReplicas: 2, maxReplicas: 4}`,
		"no ports, probes off": `{image: nginx, probes: {disabled: true}}`,
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			g := testenv.NewG(t)
			box := &modelv1.ModelBox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "box-"}}
			g.Expect(yaml.UnmarshalStrict([]byte(spec), &box.Spec)).To(Succeed())
			env.Create(t, box) // admitted by the schema
			// No controller runs here, and later tests' managers must not
			// find this ModelBox in a namespace that can no longer be written.
			defer func() { g.Expect(env.Client.Delete(ctx, box)).To(Succeed()) }()
			children, err := modelboxcontroller.ChildrenFor(box, ptr.To[int32](2))
			g.Expect(err).NotTo(HaveOccurred())
			for _, child := range children {
				g.Expect(env.Client.Apply(ctx, child, client.DryRunAll, client.FieldOwner(modelboxcontroller.FieldManager), client.ForceOwnership)).
					To(Succeed(), "%T", child)
			}
		})
	}
}
