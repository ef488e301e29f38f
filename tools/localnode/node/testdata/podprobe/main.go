// Command podprobe is the program of the test image that localnode's image
// mode tests run: it reports what a container sees, talks to the API server
// in-cluster, serves and fetches HTTP.
//
//	podprobe info [args...]     print argv, identity, cwd, env and files seen
//	podprobe kube NAMESPACE     get a ConfigMap (allowed), list Secrets (denied)
//	podprobe token              print a digest of the token, wait for it to change
//	podprobe serve PORT         answer HTTP with the host name
//	podprobe fetch URL [N]      GET URL until it answers N distinct bodies (default 1)
//	podprobe terminate MESSAGE  write MESSAGE to /dev/termination-log
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Println("usage: podprobe info|kube|token|serve|fetch|terminate")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "info":
		info()
	case "kube":
		err = kube(os.Args[2])
	case "token":
		err = token()
	case "serve":
		err = serve(os.Args[2])
	case "fetch":
		err = fetch(os.Args[2:])
	case "terminate":
		err = os.WriteFile("/dev/termination-log", []byte(os.Args[2]), 0o644)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func info() {
	fmt.Printf("ARGV=%s\n", strings.Join(os.Args, " "))
	fmt.Printf("UID=%d\nGID=%d\n", os.Getuid(), os.Getgid())
	groups, _ := os.Getgroups()
	fmt.Printf("GROUPS=%v\n", groups)
	wd, _ := os.Getwd()
	fmt.Printf("CWD=%s\n", wd)
	host, _ := os.Hostname()
	fmt.Printf("HOSTNAME=%s\n", host)
	for _, k := range []string{"FROM_IMAGE", "OVERRIDE", "HOME", "PATH", "KUBERNETES_SERVICE_HOST"} {
		fmt.Printf("ENV_%s=%s\n", k, os.Getenv(k))
	}
	fmt.Printf("MARKER=%v\n", exists("/etc/podprobe-marker"))
	// A file every Debian host has and the image has not.
	fmt.Printf("HOST_FILE=%v\n", exists("/etc/debian_version"))
	fmt.Printf("DEV_NULL=%v\n", exists("/dev/null"))
	fmt.Printf("PROC=%v\n", exists("/proc/self/status"))
	for _, p := range []string{"/etc/hosts", "/etc/resolv.conf"} {
		raw, _ := os.ReadFile(p)
		fmt.Printf("FILE_%s=%q\n", p, string(raw))
	}
	if err := os.WriteFile("/tmp/probe-write", []byte("x"), 0o644); err != nil {
		fmt.Printf("TMP_WRITE=%v\n", err)
	} else {
		fmt.Println("TMP_WRITE=ok")
	}
	if len(os.Args) > 2 && os.Args[2] == "shared" {
		raw, err := os.ReadFile("/shared/msg")
		fmt.Printf("SHARED=%s %v\n", strings.TrimSpace(string(raw)), err)
	}
	if len(os.Args) > 2 && os.Args[2] == "write-shared" {
		err := os.WriteFile("/shared/msg", []byte("from-init\n"), 0o644)
		fmt.Printf("SHARED_WRITE=%v\n", err)
	}
}

func kube(ns string) error {
	for _, f := range []string{"token", "ca.crt", "namespace"} {
		fmt.Printf("SA_FILE_%s=%v\n", f, exists("/var/run/secrets/kubernetes.io/serviceaccount/"+f))
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "allowed", metav1.GetOptions{}); err != nil {
		fmt.Printf("GET_CONFIGMAP=%v\n", err)
	} else {
		fmt.Println("GET_CONFIGMAP=ok")
	}
	_, err = cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		fmt.Println("LIST_SECRETS=forbidden")
	case err != nil:
		fmt.Printf("LIST_SECRETS=%v\n", err)
	default:
		fmt.Println("LIST_SECRETS=allowed")
	}
	return nil
}

func tokenDigest() string {
	raw, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/token")
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

func token() error {
	first := tokenDigest()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if d := tokenDigest(); d != first {
			fmt.Println("TOKEN=changed")
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("token never changed")
}

func serve(port string) error {
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, host) })
	fmt.Println("serving on :" + port)
	return http.ListenAndServe(":"+port, nil)
}

func fetch(args []string) error {
	want := 1
	if len(args) > 1 {
		want, _ = strconv.Atoi(args[1])
	}
	seen := map[string]bool{}
	// A new connection per request, so a Service spreads them.
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var last error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && len(seen) < want {
		resp, err := client.Get(args[0])
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if !seen[string(body)] {
			seen[string(body)] = true
			fmt.Printf("FETCHED=%s\n", body)
		}
	}
	if len(seen) < want {
		return fmt.Errorf("%d of %d distinct answers; last error: %v", len(seen), want, last)
	}
	return nil
}
