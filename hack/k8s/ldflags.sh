# k8s_ldflags VERSION prints the go build -ldflags that stamp a Kubernetes
# binary with VERSION (v1.37.1), as the release build does: the version the
# apiserver serves at /version and kubectl prints. Sourced by build.sh and
# compat/build.sh.
k8s_ldflags() {
  local version=$1 major minor
  major=${version#v}; major=${major%%.*}
  minor=${version#v*.}; minor=${minor%%.*}
  echo "-s -w \
 -X k8s.io/component-base/version.gitVersion=${version} \
 -X k8s.io/component-base/version.gitMajor=${major} \
 -X k8s.io/component-base/version.gitMinor=${minor} \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=${version} \
 -X k8s.io/client-go/pkg/version.gitMajor=${major} \
 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"
}
