package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/tools/demo/scenario"
	"github.com/agentplane/agentplane/tools/helmchart"
)

const (
	// platformNS is where the chart installs the platform, and where NATS
	// runs beside it.
	platformNS = "agentplane-system"
	// vendorNS runs fakevendor, standing in for the vendors' HTTPS APIs.
	vendorNS    = "vendors"
	releaseName = "agentplane"
	natsPort    = 4222
	// batchPollSeconds keeps the batch run quick: the poller and the
	// controller look at a batch every second.
	batchPollSeconds = 1
)

// images are the images the demo runs, each a tarball `make images`
// writes into the image store localnode runs pods from.
var images = []string{"agent-controller", "batch-poller", "realtime-gateway", "omnia-controllers", "supervisor", "mockagent", "fakevendor", "nats"}

// platformDeployments are the Deployments the chart installs with every
// component on.
var platformDeployments = []string{"agent-controller", "batch-poller", "realtime-gateway", "omnia-controllers"}

// imageOf is the demo's image of name at version.
func imageOf(name, version string) string { return "agentplane/" + name + ":" + version }

// checkImages fails, naming the way out, when an image the demo runs is
// not in the image store.
func checkImages(dir, version string) error {
	var missing []string
	for _, n := range images {
		if _, err := os.Stat(filepath.Join(dir, n+"-"+version+".tar")); err != nil {
			missing = append(missing, imageOf(n, version))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("images %s are not in %s: run `make images` (make demo does)", strings.Join(missing, ", "), dir)
	}
	return nil
}

// ensure creates each object, leaving one that exists as it is.
func ensure(ctx context.Context, c client.Client, objs ...client.Object) error {
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// restricted is a pod and container security context that Pod Security
// "restricted" admits: a service of the demo runs as the chart's do.
func restricted() (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	uid := int64(65532)
	no, yes := false, true
	return &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		&corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// service is a one-replica Deployment of image with one named port behind
// a ClusterIP Service of the same name, as a user runs a dependency.
func service(ns, name, image string, args []string, port int32, volumes []corev1.Volume, mounts []corev1.VolumeMount) []client.Object {
	labels := map[string]string{"app.kubernetes.io/name": name}
	one := int32(1)
	podSC, sc := restricted()
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					SecurityContext: podSC, Volumes: volumes,
					Containers: []corev1.Container{{Name: name, Image: image, ImagePullPolicy: corev1.PullNever, Args: args,
						Ports: []corev1.ContainerPort{{Name: "main", ContainerPort: port}}, SecurityContext: sc, VolumeMounts: mounts,
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("main")}},
							PeriodSeconds: 1}}}}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "main", Port: port, TargetPort: intstr.FromString("main")}}}},
	}
}

// startNATS runs NATS with JetStream as a Deployment and Service nats in
// the platform namespace, its store on an emptyDir, and returns the
// Service's ClusterIP address, through which the host reaches it.
func startNATS(ctx context.Context, c client.Client, version string) (string, error) {
	objs := service(platformNS, "nats", imageOf("nats", version), nil, natsPort,
		[]corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		[]corev1.VolumeMount{{Name: "data", MountPath: "/data"}})
	if err := ensure(ctx, c, append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}}}, objs...)...); err != nil {
		return "", err
	}
	if err := waitDeployments(ctx, c, platformNS, []string{"nats"}, 2*time.Minute); err != nil {
		return "", err
	}
	return serviceAddr(ctx, c, platformNS, "nats", "main")
}

// startFakeVendor runs tools/fakevendor from its image behind a Service in
// vendorNS, accepting the demo's key, so batch-poller reaches it by name
// as it would reach a vendor. It returns the Service's in-cluster URL.
func startFakeVendor(ctx context.Context, c client.Client, version string) (string, error) {
	objs := service(vendorNS, "fakevendor", imageOf("fakevendor", version),
		[]string{"--addr=:8089", "--api-key=" + scenario.BatchAPIKey, "--polls=2"}, 8089, nil, nil)
	if err := ensure(ctx, c, append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: vendorNS}}}, objs...)...); err != nil {
		return "", err
	}
	if err := waitDeployments(ctx, c, vendorNS, []string{"fakevendor"}, 2*time.Minute); err != nil {
		return "", err
	}
	return fmt.Sprintf("http://fakevendor.%s.svc:8089", vendorNS), nil
}

// createRealtimeKey creates the key Secret the agent-controller derives
// each realtime run's token from and the gateway calls run pods with
// (docs/realtime.md), as the chart's NOTES tell the installer to.
func createRealtimeKey(ctx context.Context, c client.Client) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	return ensure(ctx, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName, Namespace: platformNS},
		Data: map[string][]byte{realtime.KeySecretKey: key}})
}

// chartValues are the umbrella chart's values for the demo: every
// component on, one replica each (Prometheus scrapes each through its
// Service, so one pod answers for it), the images of version never
// pulled, batch-poller pointed at fakevendor, short poll periods, and
// omnia-controllers' agent pods running mockagent's runtime stand-in.
func chartValues(version, vendorURL string) map[string]any {
	img := func(name string) map[string]any {
		return map[string]any{"repository": "agentplane/" + name, "tag": version, "pullPolicy": "Never"}
	}
	common := func(name string) map[string]any {
		return map[string]any{"replicaCount": 1, "image": img(name)}
	}
	ctl := common("agent-controller")
	ctl["pollInterval"] = "5s"
	ctl["batch"] = map[string]any{"pollSeconds": batchPollSeconds}
	poller := common("batch-poller")
	poller["batchPollSeconds"] = batchPollSeconds
	poller["anthropicBaseUrl"], poller["openaiBaseUrl"], poller["geminiBaseUrl"] = vendorURL+"/", vendorURL+"/v1/", vendorURL+"/"
	gateway := common("realtime-gateway")
	omnia := common("omnia-controllers")
	omnia["runtime"] = map[string]any{"image": imageOf("mockagent", version), "imagePullPolicy": "Never",
		// The probe comes to the pod's own address: listen on all of it.
		"command": []any{"/usr/local/bin/mockagent", "omnia-runtime", "--addr=:9000"}}
	omnia["facade"] = map[string]any{"image": imageOf("mockagent", version),
		"command": []any{"/usr/local/bin/mockagent", "omnia-facade", "--host="}}
	// The demo's Provider is a mock: there is no vendor key to probe.
	omnia["providerCredentialProbe"] = false
	return map[string]any{
		"global": map[string]any{
			"batch": map[string]any{"enabled": true}, "realtime": map[string]any{"enabled": true}, "omnia": map[string]any{"enabled": true},
			"natsUrl": fmt.Sprintf("nats://nats.%s.svc:%d", platformNS, natsPort),
		},
		"agent-controller": ctl, "batch-poller": poller, "realtime-gateway": gateway, "omnia-controllers": omnia,
	}
}

// installPlatform is `helm install agentplane helm/agentplane -n
// agentplane-system` with chartValues, then a wait for each Deployment,
// said as it goes.
func installPlatform(ctx context.Context, c client.Client, repo, kubeconfig string, values map[string]any) error {
	ch, err := helmchart.LoadUmbrella(repo)
	if err != nil {
		return err
	}
	hc, err := helmchart.NewClient(kubeconfig, platformNS, releaseName)
	if err != nil {
		return err
	}
	// The demo's waiter says what it waits for; Helm's wait says nothing.
	hc.Wait = false
	rel, took, err := hc.Install(ch, values)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, strings.Join(hc.LastLines(), "\n"))
	}
	fmt.Printf("  helm install %s %s (chart %s %s) took %s\n", rel.Name, "helm/agentplane", rel.Chart.Name(), rel.Chart.Metadata.Version, took.Round(100*time.Millisecond))
	return waitDeployments(ctx, c, platformNS, platformDeployments, 3*time.Minute)
}

// waitDeployments waits for each Deployment's replicas of its current
// template to be ready, one after the other.
func waitDeployments(ctx context.Context, c client.Client, ns string, names []string, within time.Duration) error {
	for _, name := range names {
		err := newWaiter(300*time.Millisecond).wait(ctx, "deployment "+ns+"/"+name+" to be ready", within, func(ctx context.Context) error {
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
				return err
			}
			return deploymentReady(d)
		})
		if err != nil {
			return fmt.Errorf("%w (see: kubectl -n %s describe deployment %s; kubectl -n %s logs deployment/%s)", err, ns, name, ns, name)
		}
	}
	return nil
}

// deploymentReady is nil once every replica of d's current template is
// ready, else where it stands.
func deploymentReady(d *appsv1.Deployment) error {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	if s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want && s.Replicas == want {
		return nil
	}
	return fmt.Errorf("%d/%d ready, %d updated", s.ReadyReplicas, want, s.UpdatedReplicas)
}

// serviceAddr is the ClusterIP:port of the Service's named port, which
// localnode's pod network routes from the host.
func serviceAddr(ctx context.Context, c client.Client, ns, name, port string) (string, error) {
	svc := &corev1.Service{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc); err != nil {
		return "", err
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == port {
			return fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, p.Port), nil
		}
	}
	return "", fmt.Errorf("service %s/%s has no port %q", ns, name, port)
}
