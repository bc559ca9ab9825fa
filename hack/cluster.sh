#!/usr/bin/env bash
# Starts or removes a local Kubernetes cluster made of the pinned binaries in
# bin/k8s: real etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler, with NODES kwok nodes (simulated kubelets) and, where the
# machine allows it, one real node (hack/realnode.sh: a kubelet on its own
# containerd; DECKHAND_REAL_NODE=false leaves it out).
#
#   hack/cluster.sh up   NAME KUBECONFIG [NODES]   start (harmless if running)
#   hack/cluster.sh down NAME KUBECONFIG           remove
#   hack/cluster.sh kill NAME KUBECONFIG COMPONENT stop one component with
#                                                  SIGKILL, as a crash would
#                                                  (etcd, kube-apiserver, ...)
#   hack/cluster.sh start NAME KUBECONFIG          start the components that
#                                                  are not running, wait for
#                                                  the apiserver's /readyz
#
# Clusters live under $KWOK_WORKDIR (default bin/kwok).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${K8S_BIN:-$root/bin/k8s}
export KWOK_WORKDIR=${KWOK_WORKDIR:-$root/bin/kwok}
export KWOK_KUBE_VERSION=v1.37.1
export KWOK_KUBECTL_BINARY=$bin/kubectl

cmd=${1:?usage: cluster.sh up|down|kill|start NAME KUBECONFIG [NODES|COMPONENT]}
name=${2:?cluster name}
kubeconfig=${3:?kubeconfig path}
nodes=${4:-3}
kwokctl() { "$bin/kwokctl" --name "$name" "$@"; }
# kwokctl would add every cluster to ~/.kube/config and make it the current
# context; the user's file stays untouched, ours is written to $kubeconfig.
contexts=$KWOK_WORKDIR/contexts.kubeconfig
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# free_ports N prints N different random ports in 20000-32000 that nothing
# listens on, one per line. kwokctl's own choice starts at 32767 and counts
# down, so clusters made at the same moment by other users of the machine
# (parallel test runs) would pick the same ports. Every port is chosen here,
# also the apiserver's and etcd's peer port: a component restarted by a test
# (kill, start) must find its port free, and kwokctl's countdown would have
# handed it to the next cluster made meanwhile. The ports of one cluster are
# drawn together (shuf draws without repeats): drawn one by one, etcd and
# kwok were once handed the same port.
free_ports() {
  local p n=0
  for p in $(shuf -i 20000-32000 -n $(($1 * 4))); do
    ss -Hltn "sport = :$p" | grep -q . && continue
    echo "$p"
    n=$((n + 1))
    [ "$n" -lt "$1" ] || return 0
  done
  echo "no $1 free ports in 20000-32000" >&2
  return 1
}

up() {
  if kwokctl get clusters 2>/dev/null | grep -qx "$name" &&
     "$bin/kubectl" --kubeconfig "$KWOK_WORKDIR/clusters/$name/kubeconfig.yaml" get --raw /readyz >/dev/null 2>&1; then
    echo "cluster $name is already running" >&2
  else
    # A cluster left half-made by an earlier run (killed machine, stopped
    # processes) is removed first so that create starts clean.
    kwokctl delete cluster --kubeconfig "$contexts" >/dev/null 2>&1 || true
    "$root/hack/realnode.sh" down "$name" >/dev/null 2>&1 || true
    config=$(mktemp)
    trap 'rm -f "$config"' EXIT
    local ports
    mapfile -t ports < <(free_ports 6)
    [ "${#ports[@]}" -eq 6 ] || exit 1
    etcd_pki "$KWOK_WORKDIR/clusters/$name/etcd-pki"
    webhook_client_pki "$KWOK_WORKDIR/clusters/$name/webhook-client-pki"
    kwok_config "$config" "${ports[1]}" "${ports[5]}"
    kwokctl create cluster \
      --config "$config" \
      --runtime binary \
      --kube-apiserver-binary "$bin/kube-apiserver" \
      --kube-controller-manager-binary "$bin/kube-controller-manager" \
      --kube-scheduler-binary "$bin/kube-scheduler" \
      --kwok-controller-binary "$bin/kwok" \
      --etcd-binary "$bin/etcd" \
      --kubeconfig "$contexts" \
      --disable-qps-limits \
      --kube-apiserver-port "${ports[0]}" \
      --etcd-port "${ports[1]}" \
      --kube-controller-manager-port "${ports[2]}" \
      --kube-scheduler-port "${ports[3]}" \
      --controller-port "${ports[4]}" \
      --wait 2m
  fi
  # kwokctl does not supervise what it starts: on a loaded machine the
  # controller-manager or kwok has been seen to exit at start ("failed to
  # wait for apiserver being healthy"). Restart the cluster until all run.
  local dead attempt
  for attempt in 1 2 3; do
    dead=$(dead_components)
    [ -n "$dead" ] || break
    echo "cluster $name: $dead exited; restarting the cluster (attempt $attempt)" >&2
    kwokctl stop cluster >/dev/null 2>&1 || true
    kwokctl start cluster --wait 2m >/dev/null 2>&1 || true
  done
  dead=$(dead_components)
  [ -z "$dead" ] || { echo "cluster $name: $dead keep exiting; see $KWOK_WORKDIR/clusters/$name/logs" >&2; exit 1; }
  mkdir -p "$(dirname "$kubeconfig")"
  cp "$KWOK_WORKDIR/clusters/$name/kubeconfig.yaml" "$kubeconfig"
  have=$(kubectl get nodes -l type=kwok --no-headers 2>/dev/null | wc -l)
  if [ "$have" -lt "$nodes" ]; then
    kwokctl scale node --replicas "$nodes" >/dev/null
  fi
  kubectl wait --for=condition=Ready node -l type=kwok --timeout=2m >/dev/null
  # Pods need the default ServiceAccount, which the controller-manager makes
  # shortly after start: it is also the proof that the controller-manager
  # works. One that gave up on a slow apiserver is started again.
  local i
  for i in $(seq 1 120); do
    kubectl get serviceaccount default -n default >/dev/null 2>&1 && break
    [ $((i % 15)) != 0 ] || kwokctl start cluster >/dev/null 2>&1 || true
    [ "$i" != 120 ] || { echo "cluster $name: no default ServiceAccount after 2 minutes; is kube-controller-manager running? logs: $KWOK_WORKDIR/clusters/$name/logs" >&2; exit 1; }
    sleep 1
  done
  # The real node: exit code 3 means this machine cannot run one (said in
  # one line); any other failure fails the cluster.
  local rc=0
  "$root/hack/realnode.sh" up "$name" "$kubeconfig" || rc=$?
  [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || exit "$rc"
  echo "cluster $name is ready with $(kubectl get nodes -l type=kwok --no-headers | wc -l) kwok nodes" \
    "and $(kubectl get nodes -l deckhand.dev/real-node=true --no-headers 2>/dev/null | wc -l) real node; kubeconfig: $kubeconfig" >&2
}

# dead_components lists the cluster's components whose process is gone.
dead_components() {
  local c dead=()
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler kwok-controller; do
    pgrep -f -- "$KWOK_WORKDIR/clusters/$name/bin/$c " >/dev/null || dead+=("$c")
  done
  echo "${dead[*]}"
}

# etcd_pki DIR: etcd's own CA and certificates, as kubeadm makes them: a
# server and a peer certificate for 127.0.0.1 and the apiserver's client
# certificate, all from a CA only etcd trusts (not the cluster CA, which
# signs every user's client certificate). The directory lies in the
# cluster's, so kwokctl delete removes it with the cluster.
etcd_pki() {
  local dir=$1 c
  mkdir -p "$dir"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=etcd-ca" \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
  for c in server:serverAuth,clientAuth peer:serverAuth,clientAuth apiserver-etcd-client:clientAuth; do
    openssl req -new -newkey rsa:2048 -nodes -subj "/CN=${c%%:*}" \
      -keyout "$dir/${c%%:*}.key" -out "$dir/${c%%:*}.csr" 2>/dev/null
    openssl x509 -req -in "$dir/${c%%:*}.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 30 \
      -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=%s\n' "${c#*:}") \
      -out "$dir/${c%%:*}.crt" 2>/dev/null
  done
  rm -f "$dir"/*.csr "$dir/ca.srl"
  chmod 600 "$dir"/*.key
}

# webhook_client_pki DIR: a client certificate the apiserver presents to
# every webhook it calls (docs/operations/install.md, "Authenticating the
# apiserver"), from a CA of its own (ca.crt, what a manager's
# --webhook-client-ca-file names), through an AdmissionConfiguration
# (admission.yaml, --admission-control-config-file) whose kubeconfig's user
# "*" matches every webhook: the manager runs on 127.0.0.1 at ports the tests
# choose, and in the cluster behind its Service. A manager that does not ask
# for a client certificate is sent none.
webhook_client_pki() {
  local dir=$1 plugin
  mkdir -p "$dir"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=deckhand-webhook-client-ca" \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
  openssl req -new -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver-webhook-client" \
    -keyout "$dir/apiserver.key" -out "$dir/apiserver.csr" 2>/dev/null
  openssl x509 -req -in "$dir/apiserver.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 30 \
    -extfile <(printf 'extendedKeyUsage=clientAuth\n') -out "$dir/apiserver.crt" 2>/dev/null
  rm -f "$dir/apiserver.csr" "$dir/ca.srl"
  chmod 600 "$dir"/*.key
  cat > "$dir/kubeconfig" <<YAML
apiVersion: v1
kind: Config
users:
  - name: "*"
    user:
      client-certificate: $dir/apiserver.crt
      client-key: $dir/apiserver.key
YAML
  {
    echo "apiVersion: apiserver.config.k8s.io/v1"
    echo "kind: AdmissionConfiguration"
    echo "plugins:"
    for plugin in ValidatingAdmissionWebhook MutatingAdmissionWebhook; do
      echo "  - name: $plugin"
      echo "    configuration:"
      echo "      apiVersion: apiserver.config.k8s.io/v1"
      echo "      kind: WebhookAdmissionConfiguration"
      echo "      kubeConfigFile: $dir/kubeconfig"
    done
  } > "$dir/admission.yaml"
}

# kwok_config FILE ETCD_PORT ETCD_PEER_PORT: what kwokctl's flags cannot say.
#  - kwok manages only the nodes `kwokctl scale node` makes (annotated
#    kwok.x-k8s.io/node=fake), never the real node or its pods;
#  - the apiserver reaches kubelets at their InternalIP, verifies their
#    serving certificates with the cluster CA and authenticates to them with
#    the admin certificate (kubectl logs/exec on the real node);
#  - it calls webhooks and aggregated APIs at endpoint IPs, as there is no
#    kube-proxy, and its certificate names the kubernetes Service's ClusterIP,
#    which pods on the real node dial;
#  - a namespace can send all its pods to the real node with the annotations
#    of PodNodeSelector and PodTolerationRestriction (test/cluster does);
#  - it presents a client certificate to the webhooks it calls
#    (webhook_client_pki), which a manager run with
#    --webhook-client-ca-file=<cluster dir>/webhook-client-pki/ca.crt demands;
#  - owner references are checked as OpenShift checks them
#    (OwnerReferencesPermissionEnforcement: blockOwnerDeletion needs update
#    on the owner's finalizers), so every e2e test runs under that rule;
#  - the Service range holds 65k ClusterIPs, not kwokctl's ~250: benchmarks
#    make hundreds of Services;
#  - etcd serves TLS only and answers only clients with a certificate from
#    its own CA (the apiserver's), on its client and its peer port, both on
#    127.0.0.1 (kwokctl's etcd is plain HTTP: any local process, a pod
#    through route_localnet included, could read every Secret);
#  - every component listens on 127.0.0.1 only (kwokctl's default is every
#    interface: etcd, plain HTTP without authentication, answered anyone
#    who could reach the machine); the real node's pods reach the
#    apiserver through a DNAT to loopback (hack/realnode.sh);
#  - HorizontalPodAutoscalers (on metrics-server, which hack/realnode.sh
#    runs for the real node) look every 5 s and scale in after 30 s of lower
#    use rather than 5 minutes, so that tests see them act;
#  - the controller-manager and scheduler run without leader election: alone
#    in the cluster they gain nothing from it, and on a loaded machine a
#    missed lease renewal made them exit, leaving every later pod Pending.
kwok_config() {
  local service_range=10.96.0.0/16
  local pki=$KWOK_WORKDIR/clusters/$name/pki etcd=$KWOK_WORKDIR/clusters/$name/etcd-pki
  local webhook_client=$KWOK_WORKDIR/clusters/$name/webhook-client-pki
  cat > "$1" <<YAML
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
  kubeApiserverCertSANs: ["10.96.0.1"]
  etcdPeerPort: $3
componentsPatches:
  - name: etcd
    extraArgs:
      - {key: listen-client-urls, value: "https://127.0.0.1:$2", override: true}
      - {key: advertise-client-urls, value: "https://127.0.0.1:$2", override: true}
      - {key: listen-peer-urls, value: "https://127.0.0.1:$3", override: true}
      - {key: initial-advertise-peer-urls, value: "https://127.0.0.1:$3", override: true}
      - {key: initial-cluster, value: "node0=https://127.0.0.1:$3", override: true}
      - {key: cert-file, value: "$etcd/server.crt"}
      - {key: key-file, value: "$etcd/server.key"}
      - {key: trusted-ca-file, value: "$etcd/ca.crt"}
      - {key: client-cert-auth, value: "true"}
      - {key: peer-cert-file, value: "$etcd/peer.crt"}
      - {key: peer-key-file, value: "$etcd/peer.key"}
      - {key: peer-trusted-ca-file, value: "$etcd/ca.crt"}
      - {key: peer-client-cert-auth, value: "true"}
  - name: kwok-controller
    extraArgs:
      - {key: manage-all-nodes, value: "false"}
      - {key: manage-nodes-with-annotation-selector, value: kwok.x-k8s.io/node=fake}
  - name: kube-apiserver
    extraArgs:
      - {key: etcd-servers, value: "https://127.0.0.1:$2", override: true}
      - {key: etcd-cafile, value: "$etcd/ca.crt"}
      - {key: etcd-certfile, value: "$etcd/apiserver-etcd-client.crt"}
      - {key: etcd-keyfile, value: "$etcd/apiserver-etcd-client.key"}
      - {key: kubelet-preferred-address-types, value: "InternalIP,Hostname"}
      - {key: kubelet-certificate-authority, value: "$pki/ca.crt"}
      - {key: kubelet-client-certificate, value: "$pki/admin.crt"}
      - {key: kubelet-client-key, value: "$pki/admin.key"}
      - {key: enable-aggregator-routing, value: "true"}
      - {key: enable-admission-plugins, value: "PodNodeSelector,PodTolerationRestriction,OwnerReferencesPermissionEnforcement"}
      - {key: service-cluster-ip-range, value: "$service_range"}
      - {key: admission-control-config-file, value: "$webhook_client/admission.yaml"}
  - name: kube-controller-manager
    extraArgs:
      - {key: leader-elect, value: "false"}
      - {key: service-cluster-ip-range, value: "$service_range"}
      - {key: horizontal-pod-autoscaler-sync-period, value: "5s"}
      - {key: horizontal-pod-autoscaler-downscale-stabilization, value: "30s"}
  - name: kube-scheduler
    extraArgs:
      - {key: leader-elect, value: "false"}
YAML
}

down() {
  "$root/hack/realnode.sh" down "$name" || true
  kwokctl delete cluster --kubeconfig "$contexts"
  rm -f "$kubeconfig"
}

# kill_component COMPONENT kills the component with SIGKILL (no graceful
# shutdown: a crash) and waits until its process is gone, reaped included:
# kwokctl start takes a zombie for a running component and would not start
# it again. The fault tests (test/faults/clusterfaults) restart the control
# plane this way.
kill_component() {
  local c=${1:?component} pids pid i
  pids=$(pgrep -f -- "$KWOK_WORKDIR/clusters/$name/bin/$c " || true)
  [ -n "$pids" ] || { echo "cluster $name: $c is not running" >&2; exit 1; }
  kill -KILL $pids
  for pid in $pids; do
    for i in $(seq 1 300); do
      [ -e "/proc/$pid" ] || continue 2
      sleep 0.1
    done
    echo "cluster $name: $c (pid $pid) still there 30 s after SIGKILL" >&2
    exit 1
  done
  # A kwok controller started again would leave the kwok nodes alone until
  # the killed one's node Leases expire (200 s); it takes them over at once
  # when they are gone.
  if [ "$c" = kwok-controller ]; then
    kubectl get nodes -l type=kwok -o name | sed 's|^node/||' |
      xargs -r "$bin/kubectl" --kubeconfig "$kubeconfig" delete lease -n kube-node-lease --ignore-not-found >/dev/null
  fi
}

# start_components starts what is not running (kwokctl start leaves running
# components alone) with the arguments kwokctl created them with, and waits
# until the apiserver is ready.
start_components() {
  kwokctl start cluster --wait 2m >/dev/null
  local i
  for i in $(seq 1 600); do
    kubectl get --raw /readyz >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "cluster $name: apiserver not ready 2 minutes after start; logs: $KWOK_WORKDIR/clusters/$name/logs" >&2
  exit 1
}

case "$cmd" in
  up) up ;;
  down) down ;;
  kill) kill_component "${4:-}" ;;
  start) start_components ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
