package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/kubescheme"
	"github.com/agentplane/agentplane/libs/natsauth"
)

// globals are the flags every command shares.
type globals struct {
	kubeconfig, context, namespace, natsURL string
	// natsCreds and natsCA are the NATS credential and CA files; none
	// when empty.
	natsCreds, natsCA string
}

// clients are what a command talks to.
type clients struct {
	c         client.WithWatch
	kube      kubernetes.Interface
	namespace string
}

func (g *globals) clients() (*clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if g.kubeconfig != "" {
		rules.ExplicitPath = g.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: g.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	ns := g.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	scheme, err := kubescheme.New()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	return &clients{c: c, kube: kube, namespace: ns}, nil
}

func (cl *clients) agent(ctx context.Context, name string) (*agentsv1alpha1.Agent, error) {
	a := &agentsv1alpha1.Agent{}
	if err := cl.c.Get(ctx, types.NamespacedName{Namespace: cl.namespace, Name: name}, a); err != nil {
		return nil, fmt.Errorf("get Agent %s/%s: %w", cl.namespace, name, err)
	}
	return a, nil
}

// get reads the object of kind k named name in the namespace.
func (cl *clients) get(ctx context.Context, k *kind, name string) (client.Object, error) {
	o := k.newObject()
	if err := cl.c.Get(ctx, types.NamespacedName{Namespace: cl.namespace, Name: name}, o); err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", k.gvk.Kind, cl.namespace, name, err)
	}
	return o, nil
}

// list reads the objects of kind k in the namespace, or in every
// namespace when all.
func (cl *clients) list(ctx context.Context, k *kind, all bool) ([]client.Object, error) {
	l := k.newList()
	var opts []client.ListOption
	if !all {
		opts = append(opts, client.InNamespace(cl.namespace))
	}
	if err := cl.c.List(ctx, l, opts...); err != nil {
		return nil, fmt.Errorf("list %s: %w", k.title, err)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	objs := make([]client.Object, 0, len(items))
	for _, it := range items {
		o, ok := it.(client.Object)
		if !ok {
			return nil, fmt.Errorf("list %s: %T is not an object", k.title, it)
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// jetStream connects to NATS quickly or not at all: a missing NATS means
// falling back to the Agent's status, not a hang. Every NATS connection
// of agentctl is made here, with --nats-creds and --nats-ca.
func (g *globals) jetStream() (*nats.Conn, jetstream.JetStream, error) {
	auth := natsauth.Client{CredsFile: g.natsCreds, CAFile: g.natsCA}
	// A file that cannot be read is named as the flag, not as a refused
	// connection.
	for flag, f := range map[string]string{"--nats-creds": auth.CredsFile, "--nats-ca": auth.CAFile} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", flag, err)
		}
	}
	nc, err := nats.Connect(g.natsURL, append([]nats.Option{nats.Timeout(2 * time.Second), nats.Name("agentctl")}, auth.Options()...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w", g.natsURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("JetStream: %w", err)
	}
	return nc, js, nil
}
