package cluster

import (
	"fmt"
	"os"
	"time"
)

// The control plane's components, as hack/cluster.sh kill names them.
const (
	Etcd      = "etcd"
	Apiserver = "kube-apiserver"
	// Kwok is the controller that plays the kwok nodes' kubelets.
	Kwok = "kwok-controller"
)

// KillComponent kills one of the cluster's control-plane processes with
// SIGKILL, as a crash would, and returns once it is gone.
func (c *Cluster) KillComponent(component string) error {
	if out, err := c.clusterScript("kill", c.Name, c.Kubeconfig, component); err != nil {
		return fmt.Errorf("killing %s: %w\n%s", component, err, out)
	}
	return nil
}

// StartComponents starts every control-plane process that is not running,
// with the arguments the cluster was created with, and returns once the
// apiserver is ready.
func (c *Cluster) StartComponents() error {
	if out, err := c.clusterScript("start", c.Name, c.Kubeconfig); err != nil {
		return fmt.Errorf("starting the control plane: %w\n%s", err, out)
	}
	return nil
}

// RestartComponent kills component, leaves it down for downtime, and starts
// it again. It returns how long the apiserver was not ready: from the kill
// until it was ready again.
//
// Then it restarts the kwok controller too: kwok v0.8 misses pods bound
// while etcd or the apiserver was away (they stay Pending on their node for
// good), where a real kubelet would relist them; the restarted kwok lists
// every pod.
func (c *Cluster) RestartComponent(component string, downtime time.Duration) (time.Duration, error) {
	began := time.Now()
	if err := c.KillComponent(component); err != nil {
		return 0, err
	}
	time.Sleep(downtime)
	if err := c.StartComponents(); err != nil {
		return 0, err
	}
	outage := time.Since(began)
	if component != Kwok {
		if err := c.KillComponent(Kwok); err != nil {
			return 0, err
		}
		if err := c.StartComponents(); err != nil {
			return 0, err
		}
	}
	return outage, nil
}

// Signal sends sig to the process (a SIGKILL for a crash).
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }
