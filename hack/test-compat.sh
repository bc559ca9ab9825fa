#!/usr/bin/env bash
# make test-compat: the envtest suites that prove Deckhand's API on the
# Kubernetes minors users run, each against a kube-apiserver (and kubectl)
# of that minor built from Go modules (hack/k8s/compat/build.sh) and the
# pinned etcd.
#
#   hack/test-compat.sh [vX.Y.Z ...]    default: $COMPAT_VERSIONS
#
# The set, per version: the CRDs install (every CEL rule compiles on that
# apiserver), the schema judges bad specs (ModelBox's and PodBugger's CEL
# rules, PodSet's schema), admission (the PodSet and JobWatcher webhooks),
# conversion of PodSet and PodBugger through the apiserver, and one
# controller flow per kind (PodSet seeds and scales through the scale
# subresource; JobWatcher deletes finished Jobs, namespaced over cluster
# watchers; PodBugger debugs matching pods; ModelBox makes its Deployment,
# Service and PDB and leaves replicas to the HPA), and every test whose name
# ends in OnEveryMinor (a kind hack/newkind scaffolds brings its controller
# flow so, without editing this list). It prints a line per version with its
# time and result, and fails when one version failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
localbin=${LOCALBIN:-$root/bin}
versions=("$@")
[ ${#versions[@]} -gt 0 ] || read -r -a versions <<< "${COMPAT_VERSIONS:-v1.36.3 v1.35.4 v1.34.4}"
tests='^(TestSchemaRefusesBadSpecs|TestSamplesAreValid|TestSchemaBoundsCommandAndArgs|TestPodSetSchemaRefusesInvalidSpecsNamingTheField'
tests+='|TestWebhookRefusesTemplatesWhosePodsTheApiserverWouldRefuse|TestWebhookRefusesInvalidWatchers|TestBadObjectsAreRefusedInBothVersions'
tests+='|TestPodSetVersionsConvertThroughTheAPIServer|TestPodBuggerVersionsConvertThroughTheAPIServer'
tests+='|TestPodSetRunsTheSeedPodAndScalesThroughTheScaleSubresource|TestDeletesFinishedJobsAfterTheirTTL|TestNamespacedWatchersOverClusterWatchers'
tests+='|TestMatchingRunningPodsGetOneContainerEach|TestSchemaValidatesTriggers|TestIncidentsNeedNoOptInAndCountRepeats|TestSeedSampleBecomesDeploymentServiceAndPDB|TestHPAOwnsReplicas'
tests+='|Test[A-Za-z0-9]+OnEveryMinor)$'
packages=(./api/model/v1/ ./internal/webhook/... ./internal/manager/ ./internal/controller/...)

export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT=${KUBEBUILDER_CONTROLPLANE_START_TIMEOUT:-180s}
summary=() failed=0
for version in "${versions[@]}"; do
  minor=${version#v}; minor=${minor%.*}
  assets=$localbin/k8s-$minor
  start=$SECONDS
  # Compiling kube-apiserver takes minutes and both cores: nice it.
  if ! ETCD=$localbin/k8s/etcd nice -n 10 "$root/hack/k8s/compat/build.sh" "$version" "$assets"; then
    summary+=("$version: could not build the apiserver"); failed=1; continue
  fi
  built=$((SECONDS - start))
  echo "== $("$assets/kube-apiserver" --version) with etcd $("$assets/etcd" --version | sed -n 's/^etcd Version: //p')" >&2
  start=$SECONDS
  if (cd "$root" && KUBEBUILDER_ASSETS=$assets go test -p 1 -count=1 -run "$tests" "${packages[@]}"); then
    result=passed
  else
    result=FAILED; failed=1
  fi
  summary+=("$version: $result (build ${built}s, tests $((SECONDS - start))s)")
done
printf '%s\n' "${summary[@]}"
exit $failed
