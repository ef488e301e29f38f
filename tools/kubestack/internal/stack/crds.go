package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

type clients struct {
	kube kubernetes.Interface
	ext  apiextensions.Interface
}

func newClients(kubeconfigPath string) (*clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfigPath, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	ext, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("apiextensions client: %w", err)
	}
	return &clients{kube: kube, ext: ext}, nil
}

// ReadCRDs parses every *.yaml file in dir as a CRD.
func ReadCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read CRD dir: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		raw, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", n, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("%s is not a CRD: %w", n, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: kind %q, want CustomResourceDefinition", n, crd.Kind)
		}
		out = append(out, crd)
	}
	return out, nil
}

// installCRDs creates or updates every CRD in dir and waits until each is
// Established.
func installCRDs(ctx context.Context, cl *clients, dir string, timeout time.Duration) (int, error) {
	crds, err := ReadCRDs(dir)
	if err != nil {
		return 0, err
	}
	api := cl.ext.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		_, err := api.Create(ctx, crd, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cur, gerr := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if gerr != nil {
				return 0, fmt.Errorf("get CRD %s: %w", crd.Name, gerr)
			}
			crd.ResourceVersion = cur.ResourceVersion
			_, err = api.Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			return 0, fmt.Errorf("install CRD %s: %w", crd.Name, err)
		}
	}
	deadline := time.Now().Add(timeout)
	for _, crd := range crds {
		for {
			cur, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err == nil && established(cur) {
				break
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("CRD %s not Established after %s", crd.Name, timeout)
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return len(crds), nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func defaultServiceAccountExists(ctx context.Context, cl *clients) error {
	_, err := cl.kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
	return err
}
