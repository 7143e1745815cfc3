package kubernetes

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// The local API server: kube-apiserver built from the Kubernetes sources
// (the release apiserver/go.mod pins) over Debian's etcd, on a loopback
// address of its own, with a static token file and RBAC: the API server
// of a real cluster, without nodes or controllers.

const (
	// localHost is the loopback address etcd and kube-apiserver listen on;
	// the ports are chosen free at start. Other local services of this
	// repository use 127.0.0.1-3, .11-14 and .21-25.
	localHost = "127.0.0.31"
	// binaryCache holds the built kube-apiserver, one file per release
	// (kube-apiserver-v1.37.2), so only the first run pays the build.
	binaryCache = ".cache"
)

// kubeVersion is the Kubernetes release apiserver/go.mod requires.
func kubeVersion() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes")
	cmd.Dir = "apiserver"
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("read the Kubernetes release from apiserver/go.mod: %w\n%s", err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// kubeAPIServerBinary returns the cached kube-apiserver of the pinned
// release, building it first if it is not there (minutes on a cold Go
// build cache), and says which it was and how long the build took.
func kubeAPIServerBinary(logf func(string, ...any)) (string, error) {
	version, err := kubeVersion()
	if err != nil {
		return "", err
	}
	path, err := filepath.Abs(filepath.Join(binaryCache, "kube-apiserver-"+version))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err == nil {
		logf("kube-apiserver %s: cached binary %s, no build", version, path)
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	// The version stamp a release build sets (hack/lib/version.sh), so the
	// server reports, and emulates, this release.
	pkg := "k8s.io/component-base/version"
	ldflags := fmt.Sprintf("-X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=%[3]s -X %[1]s.gitMinor=%[4]s", pkg, version, major, minor)
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	start := time.Now()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", tmp, "k8s.io/kubernetes/cmd/kube-apiserver")
	cmd.Dir = "apiserver"
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build kube-apiserver %s (cd apiserver && go build k8s.io/kubernetes/cmd/kube-apiserver): %w\n%s", version, err, out)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	logf("kube-apiserver %s: built in %s (first run; cached as %s for the next runs)", version, time.Since(start).Round(time.Second), path)
	return path, nil
}

// localServer is a running etcd and kube-apiserver.
type localServer struct {
	cfg        *rest.Config
	dir        string
	etcd, kube *process
}

// process is a started program; done is closed when it has exited.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// etcdBinary is Debian's etcd (package etcd-server), from PATH.
func etcdBinary() (string, error) {
	path, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("no etcd on PATH (apt-get install etcd-server): %w", err)
	}
	return path, nil
}

// startLocalServer starts etcd and kube-apiserver with their files under
// dir and waits until the API server is ready.
func startLocalServer(etcdBin, apiserver, dir string) (*localServer, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	s := &localServer{dir: dir}
	clientURL := fmt.Sprintf("http://%s:%d", localHost, ports[0])
	peerURL := fmt.Sprintf("http://%s:%d", localHost, ports[1])
	s.etcd, err = startLogged(filepath.Join(dir, "etcd.log"), etcdBin,
		"--name=orderd-test", "--data-dir="+filepath.Join(dir, "etcd"), "--logger=zap",
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=orderd-test="+peerURL)
	if err != nil {
		return nil, err
	}
	creds, err := writeCredentials(dir)
	if err != nil {
		s.stop()
		return nil, err
	}
	addr := fmt.Sprintf("%s:%d", localHost, ports[2])
	s.kube, err = startLogged(filepath.Join(dir, "kube-apiserver.log"), apiserver,
		"--etcd-servers="+clientURL,
		"--bind-address="+localHost, fmt.Sprintf("--secure-port=%d", ports[2]), "--advertise-address="+localHost,
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--tls-cert-file="+creds.certFile, "--tls-private-key-file="+creds.keyFile,
		"--token-auth-file="+creds.tokenFile, "--anonymous-auth=false",
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+creds.keyFile, "--service-account-signing-key-file="+creds.keyFile,
		"--service-cluster-ip-range=10.96.0.0/16",
		// The reconciler publishes the advertise address as the endpoint of
		// the kubernetes Service, and refuses a loopback one; nothing here
		// reaches the server through that Service.
		"--endpoint-reconciler-type=none",
		"--profiling=false")
	if err != nil {
		s.stop()
		return nil, err
	}
	s.cfg = &rest.Config{
		Host:            "https://" + addr,
		BearerToken:     creds.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: creds.certPEM},
		QPS:             100,
		Burst:           200,
	}
	if err := s.waitReady(3 * time.Minute); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls /readyz until it answers ok, the server exits or the
// time is up; the error carries the end of the server's log.
func (s *localServer) waitReady(limit time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.cfg.CAData)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(limit)
	last := fmt.Sprintf("no answer in %s", limit)
	for time.Now().Before(deadline) {
		if s.kube.exited() {
			last = "exited"
			break
		}
		req, _ := http.NewRequest(http.MethodGet, s.cfg.Host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.cfg.BearerToken)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver at %s not ready (%s); the end of its log:\n%s", s.cfg.Host, last, s.logTail("kube-apiserver.log"))
}

func (s *localServer) logTail(name string) string {
	data, _ := os.ReadFile(filepath.Join(s.dir, name))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// stop ends the API server, then etcd.
func (s *localServer) stop() {
	for _, p := range []*process{s.kube, s.etcd} {
		if p == nil || p.exited() {
			continue
		}
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// startLogged starts a program with its output in logFile. The program is
// killed if this test process dies first.
func startLogged(logFile, bin string, args ...string) (*process, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", localHost+":0")
		if err != nil {
			return nil, fmt.Errorf("listen on %s (a loopback address; Linux routes all of 127.0.0.0/8 to lo): %w", localHost, err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

type credentials struct {
	certFile, keyFile, tokenFile string
	certPEM                      []byte
	token                        string
}

// writeCredentials makes the server's self-signed certificate for
// localHost (also the key that signs service account tokens) and a token
// file with one administrator (group system:masters, which RBAC lets do
// anything).
func writeCredentials(dir string) (credentials, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return credentials{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "orderd-test-apiserver"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP(localHost)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return credentials{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return credentials{}, err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return credentials{}, err
	}
	c := credentials{
		certFile:  filepath.Join(dir, "apiserver.crt"),
		keyFile:   filepath.Join(dir, "apiserver.key"),
		tokenFile: filepath.Join(dir, "tokens.csv"),
		certPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		token:     hex.EncodeToString(secret),
	}
	err = errors.Join(
		os.WriteFile(c.certFile, c.certPEM, 0o600),
		os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600),
		os.WriteFile(c.tokenFile, []byte(c.token+`,admin,admin,"system:masters"`+"\n"), 0o600),
	)
	return c, err
}
