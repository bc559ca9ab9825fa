// Package clusterfaults injects the faults that need real processes into
// PodSet scenarios on the local cluster (test/cluster): the apiserver or
// etcd killed with SIGKILL and restarted mid-scale, and the leader of two
// managers killed with SIGKILL mid-scale. Each run checks the PodSet
// invariants of test/faults continuously, on a watch of the test's own
// that survives the restart (it relists when it cannot resume), and that
// the manager recovered on its own: it kept running and the PodSet
// converged.
//
// The bounded runs are in test/e2e (make test); the full ones, with the
// table, in this package's tests behind the build tags e2e and
// clusterfaults (make test-faults). See docs/development/fault-suite.md.
package clusterfaults
