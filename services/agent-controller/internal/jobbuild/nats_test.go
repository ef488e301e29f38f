package jobbuild

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
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

// mountsCredentials reports whether c mounts the credential volume, read
// only, at runspec.NATSMountDir.
func mountsCredentials(c corev1.Container) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == natsVolume && m.MountPath == runspec.NATSMountDir && m.ReadOnly
	})
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
	cases := []struct {
		rule  string
		setup func(*Input)
		check func(t *testing.T, j *batchv1.Job)
	}{
		{"without an issuer nothing about NATS credentials is in the Job", func(*Input) {}, func(t *testing.T, j *batchv1.Job) {
			env := envMap(agentContainer(t, j))
			if natsVolumeOf(j) != nil || mountsCredentials(agentContainer(t, j)) || env[runspec.EnvNATSCredsFile].Name != "" || env[runspec.EnvNATSCAFile].Name != "" {
				t.Errorf("volumes %+v, env %+v", j.Spec.Template.Spec.Volumes, env)
			}
			if env[runspec.EnvNATSURL].Value == "" {
				t.Error("the run still publishes to NATS, unauthenticated, as before")
			}
		}},
		{"without a NATS URL there is no credential either", func(in *Input) { withCreds(in); in.Config.NATSURL = "" }, func(t *testing.T, j *batchv1.Job) {
			if natsVolumeOf(j) != nil || envMap(agentContainer(t, j))[runspec.EnvNATSCredsFile].Name != "" {
				t.Error("a run that publishes nowhere got a credential")
			}
		}},
		{"the run's credential Secret is mounted read-only, 0440 for the fsGroup, with only its creds key", withCreds, func(t *testing.T, j *batchv1.Job) {
			v := natsVolumeOf(j)
			if v == nil {
				t.Fatalf("no volume of Secret %s: %+v", runspec.NATSSecretName("uid-1"), j.Spec.Template.Spec.Volumes)
			}
			if *v.Secret.DefaultMode != 0o440 || len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != runspec.NATSCredsKey {
				t.Errorf("volume %+v", v.Secret)
			}
			if *j.Spec.Template.Spec.SecurityContext.FSGroup != runUser {
				t.Error("the group that may read the files is the run's user")
			}
		}},
		{"the agent container and the init step, both of which publish, mount it and are told where it is", withCreds, func(t *testing.T, j *batchv1.Job) {
			for _, c := range []corev1.Container{agentContainer(t, j), containerNamed(j, InitContainerName)} {
				env := envMap(c)
				if !mountsCredentials(c) || env[runspec.EnvNATSCredsFile].Value != runspec.NATSMountDir+"/"+runspec.NATSCredsKey {
					t.Errorf("container %s: mounts %+v, %s=%q", c.Name, c.VolumeMounts, runspec.EnvNATSCredsFile, env[runspec.EnvNATSCredsFile].Value)
				}
				if env[runspec.EnvNATSCAFile].Name != "" {
					t.Errorf("container %s is told of a CA there is none of", c.Name)
				}
			}
		}},
		{"a sidecar never gets the credential, even by naming its volume", func(in *Input) {
			withCreds(in)
			sc := &in.Station.Spec.Template.Spec.Containers[1]
			sc.VolumeMounts = append(sc.VolumeMounts, corev1.VolumeMount{Name: natsVolume, MountPath: "/steal"})
		}, func(t *testing.T, j *batchv1.Job) {
			if sc := containerNamed(j, "sidecar"); slices.ContainsFunc(sc.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == natsVolume }) {
				t.Errorf("sidecar mounts %+v", sc.VolumeMounts)
			}
		}},
		{"a Station volume of the credential's name is replaced by the run's Secret", func(in *Input) {
			withCreds(in)
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
		{"with a CA the Secret's ca.crt is mounted too and AGENT_NATS_CA_FILE names it", func(in *Input) { withCreds(in); in.Config.NATSCA = true }, func(t *testing.T, j *batchv1.Job) {
			v := natsVolumeOf(j)
			if v == nil || len(v.Secret.Items) != 2 || v.Secret.Items[1].Key != runspec.NATSCAKey {
				t.Fatalf("volume %+v", v)
			}
			if got := envMap(agentContainer(t, j))[runspec.EnvNATSCAFile].Value; got != runspec.NATSMountDir+"/"+runspec.NATSCAKey {
				t.Errorf("%s=%q", runspec.EnvNATSCAFile, got)
			}
		}},
		{"a realtime run gets its credential beside its token", func(in *Input) {
			withCreds(in)
			in.Definition.Spec.Execution = agentsv1alpha1.ExecutionRealtime
		}, func(t *testing.T, j *batchv1.Job) {
			if natsVolumeOf(j) == nil || !mountsCredentials(agentContainer(t, j)) {
				t.Error("no credential")
			}
			if !slices.ContainsFunc(j.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == tokenVolume }) {
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
