package jobbuild

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
)

// natsVolumeOf is the Job's volume of the run's NATS credential Secret,
// nil when there is none.
func natsVolumeOf(j *batchv1.Job) *corev1.Volume {
	for i, v := range j.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == runspec.NATSSecretName("uid-1") {
			return &j.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// mountsCA reports whether c mounts the CA volume, read only, at
// runspec.NATSMountDir.
func mountsCA(c corev1.Container) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == natsVolume && m.MountPath == runspec.NATSMountDir && m.ReadOnly
	})
}

// credsRef is c's AGENT_NATS_CREDS reference, nil when it has none.
func credsRef(c corev1.Container) *corev1.SecretKeySelector {
	if v := envMap(c)[runspec.EnvNATSCreds].ValueFrom; v != nil {
		return v.SecretKeyRef
	}
	return nil
}

func containerNamed(j *batchv1.Job, name string) corev1.Container {
	for _, c := range append(slices.Clone(j.Spec.Template.Spec.InitContainers), j.Spec.Template.Spec.Containers...) {
		if c.Name == name {
			return c
		}
	}
	return corev1.Container{}
}

func TestRunCredentialRules(t *testing.T) {
	withCreds := func(in *Input) { in.Config.NATSCredentials = true }
	withCA := func(in *Input) { withCreds(in); in.Config.NATSCA = true }
	cases := []struct {
		rule  string
		setup func(*Input)
		check func(t *testing.T, j *batchv1.Job)
	}{
		{"without an issuer nothing about NATS credentials is in the Job", func(*Input) {}, func(t *testing.T, j *batchv1.Job) {
			env := envMap(agentContainer(t, j))
			if natsVolumeOf(j) != nil || mountsCA(agentContainer(t, j)) || env[runspec.EnvNATSCreds].Name != "" || env[runspec.EnvNATSCAFile].Name != "" {
				t.Errorf("volumes %+v, env %+v", j.Spec.Template.Spec.Volumes, env)
			}
			if env[runspec.EnvNATSURL].Value == "" {
				t.Error("the run still publishes to NATS, unauthenticated, as before")
			}
		}},
		{"without a NATS URL there is no credential either", func(in *Input) { withCA(in); in.Config.NATSURL = "" }, func(t *testing.T, j *batchv1.Job) {
			if natsVolumeOf(j) != nil || envMap(agentContainer(t, j))[runspec.EnvNATSCreds].Name != "" {
				t.Error("a run that publishes nowhere got a credential")
			}
		}},
		{"the run's credential is never a file: no volume holds its creds key, with or without a CA", func(in *Input) { withCA(in) }, func(t *testing.T, j *batchv1.Job) {
			for _, v := range j.Spec.Template.Spec.Volumes {
				if v.Secret != nil && v.Secret.SecretName == runspec.NATSSecretName("uid-1") &&
					(len(v.Secret.Items) == 0 || slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return k.Key == runspec.NATSCredsKey })) {
					t.Errorf("volume %s mounts the credential: %+v", v.Name, v.Secret)
				}
			}
		}},
		{"the agent container and the init step, both of which publish, take the credential from the run's Secret", withCreds, func(t *testing.T, j *batchv1.Job) {
			for _, c := range []corev1.Container{agentContainer(t, j), containerNamed(j, InitContainerName)} {
				ref := credsRef(c)
				if ref == nil || ref.Name != runspec.NATSSecretName("uid-1") || ref.Key != runspec.NATSCredsKey || ref.Optional == nil || *ref.Optional {
					t.Errorf("container %s: %s from %+v", c.Name, runspec.EnvNATSCreds, ref)
				}
				if env := envMap(c); env[runspec.EnvNATSCAFile].Name != "" || mountsCA(c) {
					t.Errorf("container %s is told of a CA there is none of", c.Name)
				}
			}
			if natsVolumeOf(j) != nil {
				t.Error("without a CA the run's Secret is not mounted at all")
			}
		}},
		{"a sidecar never gets the credential or the Secret, even by naming its volume", func(in *Input) {
			withCA(in)
			sc := &in.Station.Spec.Template.Spec.Containers[1]
			sc.VolumeMounts = append(sc.VolumeMounts, corev1.VolumeMount{Name: natsVolume, MountPath: "/steal"})
		}, func(t *testing.T, j *batchv1.Job) {
			sc := containerNamed(j, "sidecar")
			if slices.ContainsFunc(sc.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == natsVolume }) || credsRef(sc) != nil {
				t.Errorf("sidecar mounts %+v, env %+v", sc.VolumeMounts, sc.Env)
			}
		}},
		{"a Station volume of the Secret's name is replaced by the run's Secret", func(in *Input) {
			withCA(in)
			in.Station.Spec.Template.Spec.Volumes = append(in.Station.Spec.Template.Spec.Volumes,
				corev1.Volume{Name: natsVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "attacker"}}})
		}, func(t *testing.T, j *batchv1.Job) {
			n := 0
			for _, v := range j.Spec.Template.Spec.Volumes {
				if v.Name == natsVolume {
					n++
					if v.Secret == nil || v.Secret.SecretName != runspec.NATSSecretName("uid-1") {
						t.Errorf("volume %s is %+v", natsVolume, v)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d volumes named %s", n, natsVolume)
			}
		}},
		{"with a CA only the Secret's ca.crt is mounted, read-only, 0440 for the fsGroup, and AGENT_NATS_CA_FILE names it", withCA, func(t *testing.T, j *batchv1.Job) {
			v := natsVolumeOf(j)
			if v == nil || len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != runspec.NATSCAKey || *v.Secret.DefaultMode != 0o440 {
				t.Fatalf("volume %+v", v)
			}
			if *j.Spec.Template.Spec.SecurityContext.FSGroup != runUser {
				t.Error("the group that may read the files is the run's user")
			}
			for _, c := range []corev1.Container{agentContainer(t, j), containerNamed(j, InitContainerName)} {
				if got := envMap(c)[runspec.EnvNATSCAFile].Value; got != runspec.NATSMountDir+"/"+runspec.NATSCAKey || !mountsCA(c) {
					t.Errorf("container %s: mounts %+v, %s=%q", c.Name, c.VolumeMounts, runspec.EnvNATSCAFile, got)
				}
			}
		}},
		{"a realtime run gets its credential beside its token", func(in *Input) {
			withCreds(in)
			in.Definition.Spec.Execution = agentsv1alpha1.ExecutionRealtime
		}, func(t *testing.T, j *batchv1.Job) {
			agent := agentContainer(t, j)
			if credsRef(agent) == nil {
				t.Error("no credential")
			}
			if envMap(agent)[realtime.EnvToken].ValueFrom == nil {
				t.Error("no token")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			in := input()
			c.setup(&in)
			j, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, j)
		})
	}
}
