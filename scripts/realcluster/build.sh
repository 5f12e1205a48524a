#!/usr/bin/env bash
# Build the upstream control plane karpy's real-cluster tests run on, from the published Go modules
# at pinned versions, into a cache outside the repository. Nothing built here is ever committed.
#
#   scripts/realcluster/build.sh            build what is missing, print the bin directory
#   KARPY_UPSTREAM_CACHE=DIR ...            cache root (default ~/.cache/karpy-upstream)
#
# What is built (one `go build` per module graph, so shared packages compile once per graph):
#   k8s.io/kubernetes   kube-apiserver kube-controller-manager kube-scheduler kubectl
#   go.etcd.io/etcd     etcd
#   sigs.k8s.io/kwok    kwok kwokctl
#   helm.sh/helm/v3     helm
#   sigs.k8s.io/karpenter  karpenter-kwok (Karpenter's KWOK provider, for bench/vs_karpenter.py)
set -euo pipefail
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "build.sh: Go is needed (the go command was not found)" >&2; exit 2; }

K8S_VERSION=${K8S_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
HELM_VERSION=${HELM_VERSION:-v3.19.5}
KARPENTER_VERSION=${KARPENTER_VERSION:-v1.14.3}
# Karpenter v1.14 and etcd v3.6.16 declare Go 1.26.10; the module proxy serves go1.27.3.
export GOTOOLCHAIN=${GOTOOLCHAIN_OVERRIDE:-go1.27.3}
export GOFLAGS="${GOFLAGS:-} -mod=mod"
export CGO_ENABLED=0

K8S_STAMP="$K8S_VERSION+version-ldflags"

CACHE=${KARPY_UPSTREAM_CACHE:-$HOME/.cache/karpy-upstream}
BIN="$CACHE/bin"
SRC="$CACHE/src"
mkdir -p "$BIN" "$SRC"
LDFLAGS="-s -w"

log() { echo "[build.sh $(date +%H:%M:%S)] $*" >&2; }

# stamp NAME VERSION: true when BIN/NAME was built from VERSION already.
built() { [[ -x "$BIN/$1" && "$(cat "$BIN/.$1.version" 2>/dev/null)" == "$2" ]]; }
stamp() { for n in "${@:2}"; do echo "$1" > "$BIN/.$n.version"; done; }

# module DIR NAME: a fresh throwaway module that only drives `go build` of upstream main packages.
module() {
    rm -rf "$1"; mkdir -p "$1"
    printf 'module karpy.local/upstream/%s\n\ngo 1.24\n' "$2" > "$1/go.mod"
}

build_kubernetes() {
    local names=(kube-apiserver kube-controller-manager kube-scheduler kubectl) all=1
    for n in "${names[@]}"; do built "$n" "$K8S_STAMP" || all=0; done
    [[ $all == 1 ]] && return 0
    log "kubernetes $K8S_VERSION: kube-apiserver kube-controller-manager kube-scheduler kubectl"
    local d="$SRC/kubernetes" staging minor
    module "$d" kubernetes
    # k8s.io/kubernetes points its staging modules at ./staging; use their published twins instead.
    minor="v0.${K8S_VERSION#v1.}"
    staging=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
        | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' | xargs sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p')
    { echo "replace ("; for m in $staging; do echo "	$m => $m $minor"; done; echo ")"; } >> "$d/go.mod"
    # The version a release build stamps (kubectl, helm and Karpenter read the server's version).
    local ver="" pkg major=${K8S_VERSION#v} kminor=${K8S_VERSION#v*.}; major=${major%%.*}; kminor=${kminor%%.*}
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ver="$ver -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$kminor"
        ver="$ver -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    (cd "$d" && go get "k8s.io/kubernetes@$K8S_VERSION" >/dev/null 2>&1 || true
     cd "$d" && go build -trimpath -ldflags "$LDFLAGS $ver" -o "$BIN/" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
    stamp "$K8S_STAMP" "${names[@]}"
}

build_simple() { # NAME VERSION MODULE PACKAGE OUT [EXTRA-LDFLAGS]
    built "$5" "$2" && return 0
    log "$3 $2: $5"
    local d="$SRC/$1"
    module "$d" "$1"
    (cd "$d" && go get "$3@$2" >/dev/null 2>&1 || true
     cd "$d" && go build -trimpath -ldflags "$LDFLAGS ${6:-}" -o "$BIN/$5" "$4")
    stamp "$2" "$5"
}

build_kwok() {
    built kwok "$KWOK_VERSION" && built kwokctl "$KWOK_VERSION" && return 0
    log "kwok $KWOK_VERSION: kwok kwokctl"
    local d="$SRC/kwok"
    module "$d" kwok
    (cd "$d" && go get "sigs.k8s.io/kwok@$KWOK_VERSION" >/dev/null 2>&1 || true
     cd "$d" && go build -trimpath -ldflags "$LDFLAGS" -o "$BIN/" sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl)
    stamp "$KWOK_VERSION" kwok kwokctl
}

start=$(date +%s)
what=${*:-kubernetes etcd kwok helm karpenter}
for w in $what; do
    case $w in
        kubernetes) build_kubernetes ;;
        etcd) build_simple etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 etcd ;;
        kwok) build_kwok ;;
        helm) build_simple helm "$HELM_VERSION" helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm helm \
            "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" ;;
        karpenter) build_simple karpenter "$KARPENTER_VERSION" sigs.k8s.io/karpenter sigs.k8s.io/karpenter/kwok karpenter-kwok \
            "-X sigs.k8s.io/karpenter/pkg/operator.Version=$KARPENTER_VERSION" ;;
        *) echo "build.sh: unknown component '$w' (kubernetes etcd kwok helm karpenter)" >&2; exit 2 ;;
    esac
done
log "done in $(( $(date +%s) - start )) s"
echo "$BIN"
