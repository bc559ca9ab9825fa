package cluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Processes returns the cluster's running processes by PID, each with the
// name of what it is: the control plane's components (as hack/cluster.sh
// names them), and the real node's kubelet, containerd, metrics-server and
// containerd's shims ("containerd-shim").
func (c *Cluster) Processes() (map[int]string, error) {
	procs := map[int]string{}
	controlPlane := filepath.Join(c.root, "bin", "kwok", "clusters", c.Name, "bin") + "/"
	node := filepath.Join(c.root, "bin", "realnode", c.Name)
	for _, f := range []string{"kubelet", "containerd", "metrics-server"} {
		b, err := os.ReadFile(filepath.Join(node, f+".pid"))
		if err != nil {
			continue // no real node, or it does not run this
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			procs[pid] = f
		}
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	shim := []byte("-address\x00" + filepath.Join(node, "containerd.sock") + "\x00")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue // gone meanwhile, or a kernel thread
		}
		arg0, _, _ := bytes.Cut(cmdline, []byte{0})
		switch {
		case strings.HasPrefix(string(arg0), controlPlane):
			procs[pid] = strings.TrimPrefix(string(arg0), controlPlane)
		case bytes.Contains(cmdline, shim):
			procs[pid] = "containerd-shim"
		}
	}
	if len(procs) == 0 {
		return nil, fmt.Errorf("no process of cluster %s found under %s", c.Name, controlPlane)
	}
	return procs, nil
}

// WebhookClientCA is the CA of the client certificate the cluster's
// apiserver presents to every webhook it calls (hack/cluster.sh,
// webhook_client_pki): what a manager's --webhook-client-ca-file names.
func (c *Cluster) WebhookClientCA() string {
	return filepath.Join(c.root, "bin", "kwok", "clusters", c.Name, "webhook-client-pki", "ca.crt")
}

// EtcdPKI is the directory of etcd's own CA and certificates
// (hack/cluster.sh): ca.crt, and apiserver-etcd-client.crt and .key, the
// one client certificate etcd answers.
func (c *Cluster) EtcdPKI() string {
	return filepath.Join(c.root, "bin", "kwok", "clusters", c.Name, "etcd-pki")
}
