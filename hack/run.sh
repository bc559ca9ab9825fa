#!/usr/bin/env bash
# `make run`: runs Deckhand in the foreground against the cluster KUBECONFIG
# (or the current kubectl context) names, or, when there is none, against the
# local kwok cluster, started first if needed.
#
# Extra manager flags go in ARGS (the kubebuilder spelling,
# `make run ARGS="--zap-log-level=debug"`) or DECKHAND_FLAGS.
# ENABLE_WEBHOOKS=false runs without admission webhooks; PodBuggers may use
# the images PODBUGGER_ALLOWED_IMAGES lists (default: the sample's). Logs are for a
# person: console encoding, coloured on a terminal (the deployed manager
# logs JSON). DECKHAND_RUN_PRINT=1 prints the manager's command and stops.
#
# On a cluster it did not start itself (KUBECONFIG set, or a current
# context), it first says what it would change there (Deckhand's CRDs, their
# conversion webhook and the webhook configuration, pointed at this machine)
# and changes it only when asked: CHANGE_CLUSTER=yes, or "yes" at the prompt
# on a terminal. Otherwise it stops before touching anything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin
kubectl=$bin/k8s/kubectl
namespace=${DECKHAND_NAMESPACE:-deckhand-system}
# The manager's local ports; DECKHAND_*_PORT choose others (the e2e test of
# `make run` does, next to the suite's own manager).
webhook_port=${DECKHAND_WEBHOOK_PORT:-9443}
metrics_port=${DECKHAND_METRICS_PORT:-8443}
health_port=${DECKHAND_HEALTH_PORT:-8081}

# Local listeners bind to loopback only.
manager=("$bin/deckhand"
  --leader-elect
  --namespace "$namespace"
  --metrics-bind-address "127.0.0.1:$metrics_port"
  --health-probe-bind-address "127.0.0.1:$health_port"
  --webhook-host 127.0.0.1
  --webhook-port "$webhook_port"
  --webhook-cert-dir "$bin/webhook-certs"
  --webhook-cert-hosts 127.0.0.1
  --zap-encoder console
  --zap-log-level "${LOG_LEVEL:-info}"
  # The PodBugger sample's image (config/samples): the sample works out of
  # the box. A real install chooses its own allow-list.
  --podbugger-allowed-images "${PODBUGGER_ALLOWED_IMAGES:-docker.io/library/busybox:*}")
webhooks=true
case "${ENABLE_WEBHOOKS:-true}" in
  false) webhooks=false; manager+=(--enable-webhooks=false) ;;
  true | "") ;;
  *) echo "ENABLE_WEBHOOKS must be true or false, not '$ENABLE_WEBHOOKS'" >&2; exit 2 ;;
esac
# shellcheck disable=SC2206 # both are lists of flags, split on spaces
manager+=(${DECKHAND_FLAGS:-} ${ARGS:-})
if [ -n "${DECKHAND_RUN_PRINT:-}" ]; then
  printf '%s\n' "${manager[@]}"
  exit 0
fi

if [ -z "${KUBECONFIG:-}" ] && ! "$kubectl" config current-context >/dev/null 2>&1; then
  export KUBECONFIG=$bin/kubeconfig
  "$root/hack/cluster.sh" up "${CLUSTER_NAME:-deckhand}" "$KUBECONFIG"
  local_cluster=true
fi
context=$("$kubectl" config current-context 2>/dev/null || echo "?")
echo "Deckhand runs against context '$context' (KUBECONFIG=${KUBECONFIG:-~/.kube/config})." >&2

# The project's own local cluster (this run's, or one an earlier run started:
# its kubeconfig is bin/kubeconfig) is changed without asking; any other
# cluster only when asked.
if [ "${local_cluster:-}" != true ] && [ "${KUBECONFIG:-}" != "$bin/kubeconfig" ]; then
  if [ "$webhooks" = true ]; then
    webhook_change="replace the validating webhook configuration deckhand-validating-webhook-configuration with one that calls 127.0.0.1:$webhook_port"
  else
    webhook_change="delete the webhook configuration deckhand-validating-webhook-configuration (webhooks are off)"
  fi
  cat >&2 <<MSG
On context '$context', make run would:
  - apply Deckhand's CRDs (config/crd), with the PodSet and PodBugger
    conversion webhook pointed at https://127.0.0.1:$webhook_port/convert,
    which only this machine's manager answers;
  - $webhook_change;
  - create the namespace $namespace, and in it the empty webhook
    certificate Secret deckhand-webhook-server-cert, if missing.
An installed Deckhand there would stop converting and validating through
its own Service until it is installed again.
MSG
  case "${CHANGE_CLUSTER:-}" in
    yes) echo "CHANGE_CLUSTER=yes: going on." >&2 ;;
    "")
      answer=
      if [ -t 0 ]; then
        read -r -p "Change context '$context' as above? Type 'yes' to go on: " answer || true
      fi
      if [ "$answer" != yes ]; then
        echo "Nothing changed. Run 'make run CHANGE_CLUSTER=yes' to allow it, or unset KUBECONFIG for the local cluster." >&2
        exit 3
      fi
      ;;
    *) echo "CHANGE_CLUSTER must be 'yes' or unset, not '$CHANGE_CLUSTER'; nothing changed." >&2; exit 2 ;;
  esac
fi

# The CRDs (their conversion webhook pointed at this manager), and the
# namespace that holds the leader-election Lease.
DECKHAND_CONVERSION_HOST=127.0.0.1 DECKHAND_CONVERSION_PORT=$webhook_port "$root/hack/install.sh"
"$kubectl" create namespace "$namespace" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
# The webhook certificate Secret, empty, as the installs ship it: the
# manager fills it and may not create it (an existing one is kept).
if [ "$webhooks" = true ] && ! "$kubectl" -n "$namespace" get secret deckhand-webhook-server-cert >/dev/null 2>&1; then
  "$kubectl" -n "$namespace" create secret generic deckhand-webhook-server-cert >/dev/null
fi

if [ "${local_cluster:-}" = true ]; then
  cat >&2 <<MSG

Reach the local cluster from another shell with the project's kubectl:
  export KUBECONFIG=$KUBECONFIG
  $kubectl get nodes
The kwok nodes only pretend to run pods; pods that tolerate the taint
deckhand.dev/real-node (if 'real-node' is listed) really run (README.md,
"The local cluster"). Stop it all with 'make cluster-down'.

MSG
fi

if [ "$webhooks" = true ]; then
  # Webhook configurations that call the manager on 127.0.0.1; the manager
  # issues its certificate for that address and injects the CA itself.
  (cd "$root" && go run ./hack/devwebhook -host 127.0.0.1 -port "$webhook_port")
else
  # Configurations left from an earlier run would send every JobWatcher and
  # PodBugger request to a server that is not there.
  "$kubectl" delete validatingwebhookconfiguration deckhand-validating-webhook-configuration --ignore-not-found >/dev/null
  cat >&2 <<MSG
Admission webhooks are OFF (ENABLE_WEBHOOKS=false): JobWatcher and
ClusterJobWatcher regexes and the PodBugger policy are not checked when you
apply them. The controllers still refuse to act on what they forbid: an
invalid watcher reports it in status, a PodBugger off the policy is Blocked.
Nothing converts between API versions either: use PodSet and PodBugger
v1beta1 (v1alpha1 requests fail).
MSG
fi

exec "${manager[@]}"
