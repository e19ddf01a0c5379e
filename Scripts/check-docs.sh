#!/usr/bin/env bash
# Keeps the guides true: typechecks every ```swift block in Docs/*.md and README.md against
# the package's debug build. Run it after `swift build --build-tests` (Scripts/test.sh does).
#
# Usage: Scripts/check-docs.sh [--scratch-path DIR]   (the same scratch path as the build)
#
# Rules for blocks:
# - Only fences whose info string is exactly `swift` are compiled; ```text, ```sh, ```bash
#   and the rest are not.
# - Each block is compiled on its own, so it must be self-contained (its own imports and
#   declarations). A fragment that is intentionally partial is fenced as ```swift-fragment
#   and is skipped.
# - Top-level code is allowed (script mode); a block containing `@main` is compiled with
#   -parse-as-library instead.
# - Compiled like the package's own targets: Swift 6 language mode (complete strict
#   concurrency) with MemberImportVisibility. Warnings are errors: top-level snippet code
#   can always avoid them (`_ = value`, `var` -> `let`), and a warning in a guide is a
#   defect a reader would copy.
# Diagnostics point at the Markdown file and its line numbers.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

build_args=()
while (($#)); do
    case "$1" in
        --scratch-path) build_args+=(--scratch-path "${2:?--scratch-path needs a directory}"); shift 2 ;;
        --scratch-path=*) build_args+=("$1"); shift ;;
        *) echo "usage: $0 [--scratch-path DIR]" >&2; exit 2 ;;
    esac
done

docs=(Docs/*.md)
[[ -e "${docs[0]}" ]] || docs=()
[[ -f README.md ]] && docs+=(README.md)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Extract: one $work/bNNN.swift per block, plus a manifest line "bNNN<TAB>file<TAB>fence line".
python3 - "$work" "${docs[@]}" >"$work/manifest" <<'PY'
import re, sys
work, files = sys.argv[1], sys.argv[2:]
fence = re.compile(r"^ *(`{3,}|~{3,})\s*(.*?)\s*$")  # any indent: fences in list items count
count = 0
for path in files:
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = fence.match(lines[i])
        if not m or (m.group(1)[0] == "`" and "`" in m.group(2)):
            i += 1
            continue
        marker, info, start = m.group(1), m.group(2), i
        i += 1
        body = []
        while i < len(lines):
            close = fence.match(lines[i])
            if close and close.group(1)[0] == marker[0] and len(close.group(1)) >= len(marker) and not close.group(2):
                break
            body.append(lines[i])
            i += 1
        else:
            if info == "swift":
                sys.exit(f"docs: {path}:{start + 1}: ```swift block is never closed")
        i += 1
        if info != "swift":
            continue
        count += 1
        name = f"b{count:03d}"
        with open(f"{work}/{name}.swift", "w", encoding="utf-8") as out:
            # Blank lines first, so the compiler's line numbers are the Markdown file's.
            out.write("\n" * (start + 1) + "\n".join(body) + "\n")
        print(f"{name}\t{path}\t{start + 1}")
PY

blocks=$(wc -l <"$work/manifest")
if ((blocks == 0)); then
    echo "docs: no \`\`\`swift blocks in Docs/*.md or README.md, nothing to check"
    exit 0
fi

bin="$(swift build "${build_args[@]}" --show-bin-path | tail -n 1)"
modules="$bin/Modules"
if [[ ! -f "$modules/SessionCore.swiftmodule" && ! -d "$modules/SessionCore.swiftmodule" ]]; then
    echo "docs: no built modules in $modules; run \`swift build --build-tests ${build_args[*]}\` first" >&2
    exit 1
fi

flags=(
    -typecheck -swift-version 6 -warnings-as-errors
    -enable-upcoming-feature MemberImportVisibility
    -module-name DocsBlock
    -I "$modules"
    -Xcc "-fmodule-map-file=$root/Sources/CCurl/module.modulemap"
    -Xcc "-fmodule-map-file=$root/Sources/COpenSSL/module.modulemap"
    -Xcc "-fmodule-map-file=$root/Sources/CImageCodecs/include/module.modulemap"
)
for flag in $(pkg-config --cflags libcurl openssl); do flags+=(-Xcc "$flag"); done

# Typecheck two blocks at a time; each leaves bNNN.log and, if it passed, bNNN.ok.
typecheck_block() {
    local block="$1" extra=()
    mapfile -t flags <<<"$CHECK_DOCS_FLAGS"
    grep -Eq '^[[:space:]]*@main\b' "$block.swift" && extra=(-parse-as-library)
    swiftc "${flags[@]}" "${extra[@]}" "$block.swift" >"$block.log" 2>&1 && touch "$block.ok"
    return 0
}
export -f typecheck_block
export CHECK_DOCS_FLAGS
CHECK_DOCS_FLAGS="$(printf '%s\n' "${flags[@]}")"
cut -f1 "$work/manifest" | sed "s|^|$work/|" | xargs -P 2 -I{} bash -c 'typecheck_block "$1"' _ {}

failed=0
while IFS=$'\t' read -r block file line; do
    if [[ ! -e "$work/$block.ok" ]]; then
        failed=$((failed + 1))
        echo "docs: FAILED: $file, block starting at line $line:" >&2
        sed -e "s|$work/$block.swift|$file|g" -e 's/^/    /' "$work/$block.log" >&2
    fi
done <"$work/manifest"

files=$(cut -f2 "$work/manifest" | sort -u | wc -l)
if ((failed)); then
    echo "docs: $failed of $blocks blocks in $files files failed to compile" >&2
    exit 1
fi
echo "docs: $blocks blocks in $files files compiled"
