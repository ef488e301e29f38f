package service

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig builds the Kubernetes client configuration: from the
// kubeconfig file when one is set, else in-cluster (the pod's projected
// ServiceAccount token). It applies the rate limit and a User-Agent naming
// the service and its version, so the API server's audit log tells the
// services apart.
func RESTConfig(service string, o KubeOptions) (*rest.Config, error) {
	var (
		rc  *rest.Config
		err error
	)
	if o.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	rc.QPS, rc.Burst = float32(o.QPS), o.Burst
	rc.UserAgent = fmt.Sprintf("%s/%s", service, Version().Version)
	return rc, nil
}
