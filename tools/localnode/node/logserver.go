package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// logServer is the kubelet endpoint: HTTPS on loopback with a self-signed
// certificate, serving /containerLogs. The API server proxies pods/log
// here. It asks for no client certificate: neither envtest's nor
// kubestack's API server is configured with kubelet client credentials, and
// it listens on loopback only, so any local client may read logs.
type logServer struct {
	n    *Node
	srv  *http.Server
	port int
}

func startLogServer(n *Node, port int) (*logServer, error) {
	cert, err := selfSignedCert(n.cfg.Address)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(n.cfg.Address, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("localnode: listen on kubelet port %d: %w", port, err)
	}
	s := &logServer{n: n, port: l.Addr().(*net.TCPAddr).Port}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", s.containerLogs)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	go func() { _ = s.srv.ServeTLS(l, "", "") }()
	return s, nil
}

// close shuts the server down, giving requests in flight up to two seconds.
// It runs on the way out, when ctx may already be cancelled, so only ctx's
// values are kept.
func (s *logServer) close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return s.srv.Close()
	}
	return nil
}

// containerLogs serves one container's log with the kubelet's query
// parameters: tailLines, limitBytes, sinceSeconds, sinceTime, timestamps,
// follow and previous.
func (s *logServer) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	q := r.URL.Query()
	opts := logOptions{tail: -1, timestamps: q.Get("timestamps") == "true", follow: q.Get("follow") == "true"}
	var err error
	if v := q.Get("tailLines"); v != "" {
		if opts.tail, err = strconv.ParseInt(v, 10, 64); err != nil || opts.tail < 0 {
			http.Error(w, "tailLines must be a non-negative integer", http.StatusBadRequest)
			return
		}
	}
	if v := q.Get("limitBytes"); v != "" {
		if opts.limitBytes, err = strconv.ParseInt(v, 10, 64); err != nil || opts.limitBytes <= 0 {
			http.Error(w, "limitBytes must be a positive integer", http.StatusBadRequest)
			return
		}
	}
	if v := q.Get("sinceSeconds"); v != "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs <= 0 {
			http.Error(w, "sinceSeconds must be a positive integer", http.StatusBadRequest)
			return
		}
		opts.since = time.Now().Add(-time.Duration(secs) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		if opts.since, err = time.Parse(time.RFC3339, v); err != nil {
			http.Error(w, "sinceTime must be RFC3339", http.StatusBadRequest)
			return
		}
	}
	pod, err := s.n.bound.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		http.Error(w, fmt.Sprintf("pod %s/%s is not on node %s", ns, name, s.n.cfg.Name), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if s.n.sim != nil && findContainer(pod, container) != nil {
		// A simulated run prints nothing.
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		return
	}
	path, status, msg := s.logPath(pod, container, q.Get("previous") == "true")
	if status != http.StatusOK {
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	fw := flushWriter{w: w}
	if f, ok := w.(http.Flusher); ok {
		fw.f = f
	}
	if err := writeLog(r.Context(), fw, path, opts); err != nil {
		s.n.log.Warn("serve log failed", "pod", ns+"/"+name, "container", container, "err", err)
	}
}

// logPath finds the log file of the current (or previous) instance.
func (s *logServer) logPath(pod *corev1.Pod, container string, previous bool) (string, int, string) {
	if findContainer(pod, container) == nil {
		return "", http.StatusNotFound, fmt.Sprintf("container %q is not in pod %s/%s", container, pod.Namespace, pod.Name)
	}
	dir := podLogDir(s.n.cfg.StateDir, pod.Namespace, pod.Name, pod.UID)
	latest := -1
	for i := 0; ; i++ {
		if _, err := os.Stat(instanceLogPath(dir, container, i)); err != nil {
			break
		}
		latest = i
	}
	if previous {
		latest--
	}
	if latest < 0 {
		if previous {
			return "", http.StatusBadRequest, fmt.Sprintf("previous terminated container %q in pod %q not found", container, pod.Name)
		}
		return "", http.StatusBadRequest, fmt.Sprintf("container %q in pod %q is waiting to start", container, pod.Name)
	}
	return instanceLogPath(dir, container, latest), http.StatusOK, ""
}

// flushWriter flushes after each write so a follower sees lines promptly.
type flushWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func (fw flushWriter) Write(p []byte) (int, error) {
	n, err := fw.w.Write(p)
	if fw.f != nil {
		fw.f.Flush()
	}
	return n, err
}

// selfSignedCert makes the serving certificate for the node's address.
// The API server does not verify kubelet certificates unless given a
// kubelet CA, which neither kubestack nor envtest configures.
func selfSignedCert(addr string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("localnode: generate serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("localnode: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localnode"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP(addr)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("localnode: self-sign serving certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
