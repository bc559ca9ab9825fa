//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/test/cluster"
)

// realNodeAddress is the real node's bridge address (hack/realnode.sh),
// where the kubelet and metrics-server listen for the apiserver.
const realNodeAddress = "172.29.0.1"

// plainHTTPServedBy lists the components that answer plain HTTP on a
// loopback port and cannot be told not to, with why that is known and
// accepted: nothing else may.
var plainHTTPServedBy = map[string]string{
	// kwok v0.8 serves its health, metrics and service-discovery port as
	// TLS and plain HTTP on one socket (cmux); it has no flag to refuse the
	// plain half. Its debugging handlers (fake exec, logs) serve nothing
	// without kwok Exec/Logs objects, which the cluster has none of.
	"kwok-controller": "plain HTTP beside TLS on one port, no option to refuse it",
	// containerd's CRI streaming server (exec, attach, port-forward of the
	// real node's pods) is plain HTTP on 127.0.0.1 unless it gets a
	// certificate the kubelet trusts; every request needs a one-time token
	// the kubelet got over the CRI socket.
	"containerd": "CRI streaming server: one-time tokens, loopback only",
}

// listener is a listening TCP socket of one of the cluster's processes.
type listener struct {
	addr    net.IP
	port    int
	pid     int
	process string
}

func (l listener) String() string {
	return fmt.Sprintf("%s (pid %d) on %s", l.process, l.pid, net.JoinHostPort(l.addr.String(), strconv.Itoa(l.port)))
}

// listenersOf lists every listening TCP socket (IPv4 and IPv6) the given
// processes hold: the sockets of each process's network namespace
// (/proc/PID/net/tcp, tcp6) whose inode is one of its file descriptors.
func listenersOf(procs map[int]string) ([]listener, error) {
	var all []listener
	for pid, name := range procs {
		inodes := map[string]bool{}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue // gone meanwhile
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
			if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
				inodes[strings.TrimSuffix(inode, "]")] = true
			}
		}
		for _, table := range []string{"tcp", "tcp6"} {
			f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(f)
			sc.Scan() // the header
			for sc.Scan() {
				fields := strings.Fields(sc.Text())
				// sl local_address rem_address st ... uid timeout inode
				if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
					continue
				}
				ip, port, err := parseProcAddr(fields[1])
				if err != nil {
					_ = f.Close()
					return nil, fmt.Errorf("/proc/%d/net/%s: %w", pid, table, err)
				}
				all = append(all, listener{addr: ip, port: port, pid: pid, process: name})
			}
			_ = f.Close()
		}
	}
	slices.SortFunc(all, func(a, b listener) int { return a.port - b.port })
	return all, nil
}

// parseProcAddr reads an address of /proc/net/tcp{,6}: the IP as 32-bit
// words in host (little-endian) order, a colon, the port in hex.
func parseProcAddr(s string) (net.IP, int, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	raw, err := hex.DecodeString(hexIP)
	if !ok || err != nil || (len(raw) != 4 && len(raw) != 16) {
		return nil, 0, fmt.Errorf("address %q", s)
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	return ip, int(port), err
}

// exposed says what is wrong with where l listens, or "".
func exposed(l listener) string {
	switch {
	case l.addr.IsLoopback():
		return ""
	case l.addr.Equal(net.ParseIP(realNodeAddress)) && (l.process == "kubelet" || l.process == "metrics-server"):
		return ""
	}
	return "listens beyond loopback"
}

// answersPlainHTTP sends a plain HTTP request to l and returns the status
// line of an HTTP answer that is not the refusal of a TLS server, or "".
func answersPlainHTTP(l listener) string {
	host := l.addr
	if host.IsUnspecified() {
		host = net.IPv4(127, 0, 0, 1)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(host.String(), strconv.Itoa(l.port)), 3*time.Second)
	if err != nil {
		return ""
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(conn, 4096))
	answer := string(b)
	if !strings.HasPrefix(answer, "HTTP/") || strings.Contains(answer, "Client sent an HTTP request to an HTTPS server") {
		return ""
	}
	status, _, _ := strings.Cut(answer, "\r\n")
	return status
}

// violations lists every socket of procs that listens beyond loopback (the
// real node's kubelet and metrics-server may use the node's bridge address)
// or answers plain HTTP, except as plainHTTPServedBy allows.
func violations(t *testing.T, procs map[int]string) []string {
	t.Helper()
	listeners, err := listenersOf(procs)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, l := range listeners {
		if why := exposed(l); why != "" {
			bad = append(bad, fmt.Sprintf("%s %s", l, why))
		}
		if _, allowed := plainHTTPServedBy[l.process]; allowed {
			continue
		}
		if status := answersPlainHTTP(l); status != "" {
			bad = append(bad, fmt.Sprintf("%s answers plain HTTP: %s", l, status))
		}
	}
	t.Logf("%d listening sockets checked: %v", len(listeners), listeners)
	return bad
}

// No process of the local cluster listens beyond loopback (but the real
// node's kubelet and metrics-server on the node's bridge address, which only
// this machine reaches), and none answers plain HTTP: what any local process
// or, through route_localnet, a pod could reach is TLS, most of it with
// client authentication. etcd answers nothing without a client certificate
// of its own CA. The check is seen failing first, on listeners this test
// plants in its own process.
func TestNothingListensBeyondLoopback(t *testing.T) {
	t.Run("a planted listener is caught", func(t *testing.T) {
		open, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = open.Close() }()
		plain, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(plain) }()
		defer func() { _ = srv.Close() }()

		bad := strings.Join(violations(t, map[int]string{os.Getpid(): "planted"}), "\n")
		for _, want := range []string{
			fmt.Sprintf("planted (pid %d) on 0.0.0.0:%d listens beyond loopback", os.Getpid(), open.Addr().(*net.TCPAddr).Port),
			fmt.Sprintf("planted (pid %d) on %s answers plain HTTP: HTTP/1.1 404 Not Found", os.Getpid(), plain.Addr()),
		} {
			if !strings.Contains(bad, want) {
				t.Errorf("the check missed %q; it found:\n%s", want, bad)
			}
		}
	})

	procs, err := c.Processes()
	if err != nil {
		t.Fatal(err)
	}
	for _, component := range []string{cluster.Etcd, cluster.Apiserver, "kube-controller-manager", "kube-scheduler", cluster.Kwok} {
		if !slices.Contains(slices.Collect(maps.Values(procs)), component) {
			t.Fatalf("no %s among the cluster's processes %v", component, procs)
		}
	}
	if bad := violations(t, procs); len(bad) > 0 {
		t.Errorf("the local cluster exposes:\n%s", strings.Join(bad, "\n"))
	}

	t.Run("etcd answers only its client certificate", func(t *testing.T) {
		pki := c.EtcdPKI()
		caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(caPEM)
		cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "apiserver-etcd-client.crt"), filepath.Join(pki, "apiserver-etcd-client.key"))
		if err != nil {
			t.Fatal(err)
		}
		listeners, err := listenersOf(procs)
		if err != nil {
			t.Fatal(err)
		}
		etcdPorts := 0
		for _, l := range listeners {
			if l.process != cluster.Etcd {
				continue
			}
			etcdPorts++
			url := fmt.Sprintf("https://%s/version", net.JoinHostPort(l.addr.String(), strconv.Itoa(l.port)))
			get := func(certs ...tls.Certificate) (string, error) {
				hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
					TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12},
				}}
				resp, err := hc.Get(url)
				if err != nil {
					return "", err
				}
				defer func() { _ = resp.Body.Close() }()
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				return resp.Status + " " + string(b), nil
			}
			if answer, err := get(); err == nil {
				t.Errorf("etcd on %s answered a client without a certificate: %s", url, answer)
			}
			// The same request with the apiserver's certificate is served:
			// the refusal above is etcd's, not the probe's.
			if _, err := get(cert); err != nil {
				t.Errorf("etcd on %s refused the apiserver's client certificate: %v", url, err)
			}
		}
		if etcdPorts != 2 {
			t.Errorf("etcd listens on %d ports, want its client and peer port", etcdPorts)
		}
	})
}

// A pod on the real node cannot reach the machine's loopback ports, though
// the node's bridge has route_localnet set (the kubernetes Service's DNAT to
// the apiserver's loopback address needs it): the guard hack/realnode.sh
// adds with it drops packets to 127.0.0.0/8 that came from elsewhere and
// were not DNATed (CVE-2020-8558). The pod routes 127.0.0.0/8 through the
// node as an attacker's pod would (it needs NET_ADMIN to do so in its own
// network namespace, and gives up its own 127.0.0.1, which would make the
// node's answers from that address martian to it; a pod with NET_RAW can
// forge the same packets); the
// same pod reaches the apiserver through the Service, so its network works.
func TestAPodCannotReachTheNodesLoopbackPorts(t *testing.T) {
	c.RealNode(t)
	g := rnG(t)
	ns := c.RealNodeNamespace(t, nil)

	procs, err := c.Processes()
	g.Expect(err).NotTo(HaveOccurred())
	listeners, err := listenersOf(procs)
	g.Expect(err).NotTo(HaveOccurred())
	targets := map[string]string{}
	for _, l := range listeners {
		if (l.process == cluster.Etcd || l.process == cluster.Apiserver) && l.addr.IsLoopback() {
			targets[fmt.Sprintf("%s port %d", l.process, l.port)] = strconv.Itoa(l.port)
		}
	}
	g.Expect(targets).To(HaveLen(3), "etcd's client and peer ports and the apiserver's: %v", listeners)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "localnet"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           cluster.BusyboxImage,
				ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", `set -e
sysctl -w net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.eth0.route_localnet=1
ip route del table local 127.0.0.0/8 dev lo
ip route del table local 127.0.0.1 dev lo
ip route add 127.0.0.0/8 via ` + realNodeAddress + ` dev eth0
ip addr del 127.0.0.1/8 dev lo
touch /tmp/routed
exec sleep 3600`},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), Privileged: ptr.To(true)},
			}},
		},
	}
	g.Expect(c.Client.Create(context.Background(), pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		runningOnRealNode(g, c.RealNode(t), ns, pod.Name)
		_, err := c.KubectlWithin(kubectlWait, "exec", "-n", ns, pod.Name, "--", "test", "-e", "/tmp/routed")
		g.Expect(err).NotTo(HaveOccurred())
	}).Should(Succeed())

	dial := func(hostPort string) string {
		out, _ := c.KubectlWithin(kubectlWait, "exec", "-n", ns, pod.Name, "--", "sh", "-c",
			"if nc -w 3 "+hostPort+" </dev/null; then echo connected; else echo refused; fi")
		return strings.TrimSpace(out)
	}
	g.Expect(dial("10.96.0.1 443")).To(Equal("connected"), "the pod reaches the apiserver through the kubernetes Service")
	for what, port := range targets {
		g.Expect(dial("127.0.0.1 "+port)).To(Equal("refused"), "a pod connected to %s on the node's loopback", what)
	}
}
