#!/usr/bin/env bash
# A real node beside the kwok nodes: a kubelet built from the pinned module
# (hack/k8s) on a containerd, runc and CNI bridge of the project's own,
# joined to a local cluster that hack/cluster.sh started.
#
#   hack/realnode.sh deps                   install the Debian packages (root)
#   hack/realnode.sh prepare                deps, the kubelet and the test images,
#                                           where the machine can run a node
#   hack/realnode.sh up   NAME KUBECONFIG   prepare, start and join the node "real-node"
#   hack/realnode.sh down NAME              stop kubelet and containerd, remove
#                                           their pods, mounts and state
#   hack/realnode.sh load NAME TAR...       import image tars into the node
#   hack/realnode.sh logs NAME              tails of the kubelet and containerd logs
#
# It needs root (containers, mounts, a bridge, one NAT rule and the drop
# rule route_localnet needs). Where the
# machine cannot run a node, `up` prints one line saying why, records it in
# bin/realnode/NAME.unavailable (tests skip with it) and exits 3; any other
# failure exits 1 after printing the logs' tails.
#
# Machine-wide there is one real node at a time (it owns the bridge
# deckhand0, 172.29.0.0/16, and the kubelet port 10250): a second
# cluster runs with kwok nodes only and says so. The node's address is the
# bridge's, 172.29.0.1 (kubelet refuses a loopback node IP): the kubelet
# listens there and on 127.0.0.1 only, nothing is reachable from outside.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${K8S_BIN:-$root/bin/k8s}
export KWOK_WORKDIR=${KWOK_WORKDIR:-$root/bin/kwok}
kubelet_bin=${KUBELET:-$root/bin/node/kubelet}
# metrics-server, built from its Go module at this version (its own go.mod:
# it does not share the toolchain module's Kubernetes libraries), reads the
# real node's kubelet so that HorizontalPodAutoscalers act on real CPU use.
METRICS_SERVER_VERSION=v0.8.0
metrics_server_bin=${METRICS_SERVER:-$root/bin/node/metrics-server-$METRICS_SERVER_VERSION}
images=$root/bin/images

NODE=real-node
BRIDGE=deckhand0
SUBNET=172.29.0.0/16
GATEWAY=172.29.0.1
PAUSE_IMAGE=${PAUSE_IMAGE:-localhost/deckhand/pause:v1}
TAINT=deckhand.dev/real-node
PACKAGES=(containerd runc containernetworking-plugins busybox-static)
# The guard route_localnet needs (CVE-2020-8558), as kube-proxy adds it:
# packets to 127.0.0.0/8 that did not come in on loopback are dropped,
# unless they belong to a connection or were DNATed there (the kubernetes
# Service's rule below). Without it a pod that routes 127.0.0.0/8 through
# the bridge reaches every loopback port of the machine: etcd, the
# apiserver's, the manager's.
LOCALNET_GUARD=(! -i lo -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m comment --comment deckhand-realnode
  -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP)
# The machine-wide claim: which state directory owns the real node.
OWNER=/run/deckhand-realnode.owner

log() { echo "realnode: $*" >&2; }

deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "needs root to install ${missing[*]} (sudo apt-get install ${missing[*]})"
    return 3
  fi
  log "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    apt-get update >/dev/null 2>&1 || true
    if ! apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
      log "could not install ${missing[*]} with apt-get"
      return 3
    fi
  fi
}

# unavailable REASON: this machine cannot run the node; say so once.
unavailable() {
  echo "$1" > "$root/bin/realnode/$name.unavailable"
  log "no real node, kwok nodes only: $1"
  exit 3
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_pid FILE: SIGTERM, then SIGKILL after 15 s.
stop_pid() {
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

logs() {
  local state=$1
  for f in kubelet containerd metrics-server; do
    [ -f "$state/$f.log" ] || continue
    echo "----- last 40 lines of $state/$f.log"
    tail -n 40 "$state/$f.log"
  done
}

# teardown STATE: everything the node started or made, in reverse.
teardown() {
  local state=$1
  [ -d "$state" ] || return 0
  stop_pid "$state/metrics-server.pid"
  stop_pid "$state/kubelet.pid"
  # Containers go first: runc keeps its state in the node's own root.
  if [ -d "$state/runc" ]; then
    for id in $(runc --root "$state/runc" list -q 2>/dev/null); do
      runc --root "$state/runc" kill "$id" KILL 2>/dev/null || true
      runc --root "$state/runc" delete -f "$id" 2>/dev/null || true
    done
  fi
  stop_pid "$state/containerd.pid"
  # containerd's shims outlive it; each names our socket on its command line.
  local pid
  for pid in $(pgrep -f -- "-address $state/containerd.sock" || true); do
    kill -9 "$pid" 2>/dev/null || true
  done
  # Mounts under the state directory (pod volumes, rootfs, network
  # namespaces), deepest first; mountinfo names them by their real path,
  # which differs where bin/ is a symbolic link (a git worktree's).
  awk -v p="$(readlink -f "$state")/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  # The machine-wide parts, unless another node owns them now.
  local owner
  owner=$(cat "$OWNER" 2>/dev/null || true)
  if [ -z "$owner" ] || [ "$owner" = "$state" ]; then
    while iptables -t nat -D PREROUTING -i "$BRIDGE" -m comment --comment deckhand-realnode \
      -p tcp -d "$(cat "$state/service-ip" 2>/dev/null || echo 10.0.0.1)" --dport 443 \
      -j DNAT --to-destination "$(cat "$state/apiserver-dnat" 2>/dev/null || echo none)" 2>/dev/null; do :; done
    while iptables -D INPUT "${LOCALNET_GUARD[@]}" 2>/dev/null; do :; done
    ip link del "$BRIDGE" 2>/dev/null || true
    # The kubelet's canary chains (it makes no other rules).
    local t
    for t in nat filter mangle; do
      iptables -t "$t" -X KUBE-KUBELET-CANARY 2>/dev/null || true
      ip6tables -t "$t" -X KUBE-KUBELET-CANARY 2>/dev/null || true
    done
    rm -f "$OWNER"
  fi
  rm -rf --one-file-system "$state"
}

down() {
  local state=$root/bin/realnode/$name
  rm -f "$root/bin/realnode/$name.unavailable"
  [ -d "$state" ] || return 0
  teardown "$state"
  log "stopped the real node of cluster $name"
}

# claim: take the machine-wide real node for $state, or explain why not.
# What a stopped node (killed test run, rebooted machine) left is removed.
claim() {
  exec 9>/run/deckhand-realnode.lock
  flock -w 60 9 || unavailable "timed out waiting for /run/deckhand-realnode.lock"
  local other
  other=$(cat "$OWNER" 2>/dev/null || true)
  if [ -n "$other" ] && [ "$other" != "$state" ] && { alive "$other/kubelet.pid" || alive "$other/containerd.pid"; }; then
    unavailable "the machine's real node is in use by $other"
  fi
  if [ -n "$other" ] && [ -d "$other" ]; then teardown "$other"; fi
  if [ -d "$state" ]; then teardown "$state"; fi
  mkdir -p "$state"
  echo "$state" > "$OWNER"
  exec 9>&-
}

certs() {
  local pki=$KWOK_WORKDIR/clusters/$name/pki out=$state/pki
  mkdir -p "$out"
  [ -f "$pki/ca.key" ] || { log "no cluster CA in $pki"; return 1; }
  # The kubelet's client identity (Node authorizer style) and its serving
  # certificate for the node's address, both from the cluster CA, so the apiserver
  # verifies the kubelet (--kubelet-certificate-authority) and the kubelet
  # authenticates the apiserver's client certificate.
  openssl req -new -newkey rsa:2048 -nodes -subj "/O=system:nodes/CN=system:node:$NODE" \
    -keyout "$out/client.key" -out "$out/client.csr" 2>/dev/null
  openssl x509 -req -in "$out/client.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile <(printf 'extendedKeyUsage=clientAuth\n') -out "$out/client.crt" 2>/dev/null
  openssl req -new -newkey rsa:2048 -nodes -subj "/CN=$NODE" \
    -keyout "$out/serving.key" -out "$out/serving.csr" 2>/dev/null
  openssl x509 -req -in "$out/serving.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile <(printf 'subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\n' "$GATEWAY" "$NODE") \
    -out "$out/serving.crt" 2>/dev/null
  cp "$pki/ca.crt" "$out/ca.crt"
  # metrics-server's serving certificate, for the name the aggregator
  # verifies (its Service's, metrics-server.kube-system.svc).
  openssl req -new -newkey rsa:2048 -nodes -subj "/CN=metrics-server" \
    -keyout "$out/metrics-server.key" -out "$out/metrics-server.csr" 2>/dev/null
  openssl x509 -req -in "$out/metrics-server.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile <(printf 'subjectAltName=DNS:metrics-server.kube-system.svc,IP:%s\nextendedKeyUsage=serverAuth\n' "$GATEWAY") \
    -out "$out/metrics-server.crt" 2>/dev/null
}

# start_metrics_server runs metrics-server on the node's bridge address
# (where the kubelet listens: reachable from this machine only), reading
# the real node's kubelet only (kwok's nodes have none), and registers it
# as the metrics.k8s.io API: a Service without selector whose
# EndpointSlice names that address (the apiserver routes aggregated APIs
# to endpoints, and an endpoint may not be loopback), and an APIService
# trusting the cluster CA. It waits until the node's metrics are served (a
# scrape or two).
start_metrics_server() {
  local port
  for port in $(seq 40443 40543); do
    ss -Hltn "sport = :$port" 2>/dev/null | grep -q . || break
  done
  setsid "$metrics_server_bin" --bind-address "$GATEWAY" --secure-port "$port" \
    --tls-cert-file "$state/pki/metrics-server.crt" --tls-private-key-file "$state/pki/metrics-server.key" \
    --kubeconfig "$kubeconfig" --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
    --kubelet-preferred-address-types InternalIP --kubelet-use-node-status-port \
    --kubelet-certificate-authority "$state/pki/ca.crt" --node-selector "$TAINT=true" \
    --metric-resolution 15s </dev/null >"$state/metrics-server.log" 2>&1 &
  echo $! > "$state/metrics-server.pid"
  "$bin/kubectl" --kubeconfig "$kubeconfig" apply -f - >/dev/null <<YAML || return 1
apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: kube-system}
spec: {ports: [{name: https, port: 443, targetPort: $port}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: metrics-server, namespace: kube-system, labels: {kubernetes.io/service-name: metrics-server}}
addressType: IPv4
ports: [{name: https, port: $port, protocol: TCP}]
endpoints: [{addresses: ["$GATEWAY"], conditions: {ready: true}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {namespace: kube-system, name: metrics-server, port: 443}
  caBundle: $(base64 -w0 < "$state/pki/ca.crt")
YAML
  local _
  for _ in $(seq 1 90); do
    "$bin/kubectl" --kubeconfig "$kubeconfig" get --raw "/apis/metrics.k8s.io/v1beta1/nodes/$NODE" >/dev/null 2>&1 && return 0
    alive "$state/metrics-server.pid" || { log "metrics-server exited"; return 1; }
    sleep 1
  done
  log "metrics-server served no metrics of $NODE within 90 s"
  return 1
}

# The bridge exists before the first pod so that its address can be the
# node's; the CNI bridge plugin adopts it.
make_bridge() {
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr replace "$GATEWAY/${SUBNET#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
}

start_containerd() {
  mkdir -p "$state/cni/net.d"
  cat > "$state/cni/net.d/10-deckhand.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "deckhand-realnode",
  "plugins": [{
    "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": "$state/cni/ipam",
             "ranges": [[{"subnet": "$SUBNET", "gateway": "$GATEWAY"}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
JSON
  cat > "$state/containerd.toml" <<TOML
# The real node's own containerd: nothing here touches a system containerd.
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$state/containerd.sock"
[ttrpc]
  address = "$state/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$state/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The VM refuses a sandbox's oom_score_adj of -998; without this every
  # pod sandbox fails ("can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  # Pods' network namespaces under the state directory, so that what a
  # killed node leaves is found and removed.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$state/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
TOML
  setsid containerd --config "$state/containerd.toml" </dev/null >"$state/containerd.log" 2>&1 &
  echo $! > "$state/containerd.pid"
  for _ in $(seq 1 300); do
    ctr --address "$state/containerd.sock" version >/dev/null 2>&1 && return 0
    alive "$state/containerd.pid" || break
    sleep 0.1
  done
  log "containerd did not start"
  return 1
}

load() {
  local tar
  for tar in "$@"; do
    ctr --address "$state/containerd.sock" -n k8s.io images import "$tar" >/dev/null
  done
}

start_kubelet() {
  local server
  server=$("$bin/kubectl" --kubeconfig "$kubeconfig" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  cat > "$state/kubelet.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "$server", certificate-authority: "$state/pki/ca.crt"}}]
users: [{name: kubelet, user: {client-certificate: "$state/pki/client.crt", client-key: "$state/pki/client.key"}}]
contexts: [{name: local, context: {cluster: local, user: kubelet}}]
current-context: local
YAML
  cat > "$state/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $GATEWAY
port: 10250
readOnlyPort: 0
# No healthz port: it is plain HTTP, and nothing here reads it (the node's
# Ready condition says the same through the apiserver).
healthzPort: 0
containerRuntimeEndpoint: unix://$state/containerd.sock
# The host is cgroup v1 (hybrid); kubelet >= 1.35 refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
# A busy development disk must not evict pods nor collect the imported
# images (they cannot be pulled again).
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: $state/pod-logs
# A crash-looping container restarts at most 10 s after it failed, not 5
# minutes (KubeletCrashLoopBackOffMax, beta and on since 1.35): PodBugger's
# incident tests and bench see a failure every few seconds, as the issue's
# "exits 1 every few seconds" means, instead of one every few minutes.
crashLoopBackOff: {maxContainerRestartPeriod: 10s}
tlsCertFile: $state/pki/serving.crt
tlsPrivateKeyFile: $state/pki/serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization:
  mode: Webhook
registerWithTaints:
  - {key: $TAINT, value: "true", effect: NoSchedule}
YAML
  setsid "$kubelet_bin" --config "$state/kubelet.yaml" --kubeconfig "$state/kubelet.kubeconfig" \
    --root-dir "$state/kubelet" --hostname-override "$NODE" --node-ip "$GATEWAY" \
    --node-labels "$TAINT=true" --v 1 </dev/null >"$state/kubelet.log" 2>&1 &
  echo $! > "$state/kubelet.pid"
}

# service_nat: pods reach the apiserver at the kubernetes Service's ClusterIP
# as in any cluster; with no kube-proxy, one DNAT rule on the bridge does it.
service_nat() {
  local ip port
  ip=$("$bin/kubectl" --kubeconfig "$kubeconfig" get service kubernetes -n default -o jsonpath='{.spec.clusterIP}')
  port=$("$bin/kubectl" --kubeconfig "$kubeconfig" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  port=${port##*:}
  echo "$ip" > "$state/service-ip"
  echo "127.0.0.1:$port" > "$state/apiserver-dnat"
  # The apiserver listens on 127.0.0.1 only (hack/cluster.sh): packets from
  # the bridge may be routed to loopback, only those DNATed there (the guard
  # goes first).
  iptables -C INPUT "${LOCALNET_GUARD[@]}" 2>/dev/null || iptables -I INPUT 1 "${LOCALNET_GUARD[@]}"
  sysctl -qw "net.ipv4.conf.$BRIDGE.route_localnet=1"
  iptables -t nat -A PREROUTING -i "$BRIDGE" -m comment --comment deckhand-realnode \
    -p tcp -d "$ip" --dport 443 -j DNAT --to-destination "127.0.0.1:$port"
}

fail() {
  log "$1"
  logs "$state" >&2
  teardown "$state"
  exit 1
}

# why_not prints why this machine cannot run a real node, or nothing.
why_not() {
  case "${DECKHAND_REAL_NODE:-auto}" in
    0|false|no|off) echo "DECKHAND_REAL_NODE=${DECKHAND_REAL_NODE} asks for none"; return ;;
  esac
  if [ "$(id -u)" -ne 0 ]; then
    echo "a real node needs root (containers, mounts, a bridge); run as root or set DECKHAND_REAL_NODE=false"
  elif [ ! -d /sys/fs/cgroup ]; then
    echo "no cgroups at /sys/fs/cgroup"
  fi
}

# prepare: what the node needs before it starts, built or installed once.
prepare() {
  [ -z "$(why_not)" ] || return 0
  deps || return 3
  if [ ! -x "$kubelet_bin" ] || [ "$root/hack/k8s/go.mod" -nt "$kubelet_bin" ]; then
    log "building the kubelet (minutes the first time)"
    "$root/hack/k8s/build.sh" "$(dirname "$kubelet_bin")" kubelet || return 1
  fi
  if [ ! -x "$metrics_server_bin" ]; then
    log "building metrics-server $METRICS_SERVER_VERSION (a few minutes the first time)"
    local tmp
    tmp=$(mktemp -d)
    GOBIN=$tmp go install -trimpath "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION" || { rm -rf "$tmp"; return 1; }
    mv "$tmp/metrics-server" "$metrics_server_bin"
    rm -rf "$tmp"
  fi
  "$root/hack/images.sh" test 2>/dev/null || return 1
}

up() {
  mkdir -p "$root/bin/realnode"
  rm -f "$root/bin/realnode/$name.unavailable"
  local reason
  reason=$(why_not)
  [ -z "$reason" ] || unavailable "$reason"
  if alive "$state/kubelet.pid" && "$bin/kubectl" --kubeconfig "$kubeconfig" get node "$NODE" >/dev/null 2>&1; then
    log "the real node of cluster $name is already running"
    return 0
  fi
  local rc=0
  prepare || rc=$?
  [ "$rc" -ne 3 ] || unavailable "the packages ${PACKAGES[*]} are missing and could not be installed"
  [ "$rc" -eq 0 ] || fail "could not build the kubelet or the test images"
  claim
  local started=$SECONDS
  certs || fail "could not make the kubelet's certificates"
  make_bridge || fail "could not make the bridge $BRIDGE"
  start_containerd || fail "containerd did not start"
  load "$images"/*.tar || fail "could not import the images in $images"
  start_kubelet
  service_nat || fail "could not add the NAT rule for the kubernetes Service"
  local ready=false
  for _ in $(seq 1 120); do
    if "$bin/kubectl" --kubeconfig "$kubeconfig" get node "$NODE" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -qx True; then
      ready=true
      break
    fi
    alive "$state/kubelet.pid" || fail "the kubelet exited"
    sleep 1
  done
  $ready || fail "node $NODE did not become Ready within 2 minutes"
  start_metrics_server || fail "metrics-server did not start"
  log "node $NODE is Ready after $((SECONDS - started)) s (containerd and kubelet state in $state; 'hack/realnode.sh logs $name')"
}

cmd=${1:?usage: realnode.sh deps | prepare | up NAME KUBECONFIG | down NAME | load NAME TAR... | logs NAME}
case "$cmd" in
  deps) deps ;;
  prepare) prepare ;;
  up)
    name=${2:?cluster name}; kubeconfig=${3:?kubeconfig}
    state=$root/bin/realnode/$name
    up ;;
  down) name=${2:?cluster name}; down ;;
  load)
    name=${2:?cluster name}; shift 2
    state=$root/bin/realnode/$name
    load "$@" ;;
  logs) name=${2:?cluster name}; logs "$root/bin/realnode/$name" ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
