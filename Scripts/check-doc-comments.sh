#!/usr/bin/env bash
# Keeps the API documented: fails, listing them, when a public or open declaration of a
# library module has no `///` (or `/** */`) doc comment of its own.
# Run it after `swift build --build-tests` (Scripts/test.sh does).
#
# Usage: Scripts/check-doc-comments.sh [--scratch-path DIR]   (the same scratch path as the build)
#
# How: the compiler's own view of the API, not a text scan. For each Swift target of a
# library product (from `swift package describe`), `swift symbolgraph-extract` reads the
# debug build's module with `-minimum-access-level public`, so exactly what a user can
# call is listed: members of internal types, `public` inside `private` extensions and
# the like are left out as the compiler leaves them out, and attributes, macros or
# multi-line declarations cannot fool it the way they fool a regular expression.
#
# The rule, symbol by symbol:
# - Checked: every public or open symbol declared in this package's Sources/, including
#   enum cases, members of extensions to other modules' types (`Notification.Name`,
#   `URLProtectionSpace`), and hand-written conformance members (`description`, `==`,
#   `hash(into:)`): each needs a doc comment written on the declaration itself.
# - Not checked, because nobody wrote them:
#   - members the compiler synthesizes (Codable's `init(from:)`, an enum's `==`): they
#     have no source location;
#   - members a type only inherits (a superclass's method, a protocol extension's default
#     implementation shown on a conforming type; `-skip-synthesized-members`).
# - Inherited documentation does not count: with `-skip-inherited-docs` a requirement's
#   or an overridden method's comment is not copied onto the implementation, so the
#   implementation needs its own (one line saying what this type does is enough).
# - Symbols of other packages and of the system are never listed.
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

bin="$(swift build "${build_args[@]}" --show-bin-path | tail -n 1)"
modules="$bin/Modules"

# The Swift targets behind library products: what a user of the package imports.
mapfile -t targets < <(swift package describe --type json | python3 -c '
import json, sys
package = json.load(sys.stdin)
swift_targets = {t["name"] for t in package["targets"] if t.get("module_type") == "SwiftTarget"}
names = set()
for product in package["products"]:
    if "library" in product["type"]:
        names.update(t for t in product["targets"] if t in swift_targets)
print("\n".join(sorted(names)))
')
if ((${#targets[@]} == 0)); then
    echo "doc-comments: no Swift library targets found in Package.swift" >&2
    exit 1
fi
for target in "${targets[@]}"; do
    if [[ ! -e "$modules/$target.swiftmodule" ]]; then
        echo "doc-comments: $modules/$target.swiftmodule is missing; run \`swift build --build-tests ${build_args[*]}\` first" >&2
        exit 1
    fi
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

triple="$(swiftc -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["target"]["triple"])')"
flags=(
    -target "$triple"
    -I "$modules"
    -minimum-access-level public
    -skip-synthesized-members
    -skip-inherited-docs
    -omit-extension-block-symbols
    -Xcc "-fmodule-map-file=$root/Sources/CCurl/module.modulemap"
    -Xcc "-fmodule-map-file=$root/Sources/COpenSSL/module.modulemap"
    -Xcc "-fmodule-map-file=$root/Sources/CImageCodecs/include/module.modulemap"
)
for flag in $(pkg-config --cflags libcurl openssl); do flags+=(-Xcc "$flag"); done

for target in "${targets[@]}"; do
    mkdir -p "$work/$target"
    if ! swift symbolgraph-extract -module-name "$target" "${flags[@]}" -output-dir "$work/$target" \
        >"$work/$target.log" 2>&1; then
        echo "doc-comments: swift symbolgraph-extract failed for $target:" >&2
        sed 's/^/    /' "$work/$target.log" >&2
        exit 1
    fi
done

python3 - "$root/Sources" "$work" "${targets[@]}" <<'PY'
import glob, json, os, sys
from urllib.parse import unquote, urlparse

sources, work, targets = os.path.realpath(sys.argv[1]) + os.sep, sys.argv[2], sys.argv[3:]
missing, checked = [], 0
for target in targets:
    seen = set()
    # Module.symbols.json, plus Module@Other.symbols.json for extensions to Other's types.
    for path in sorted(glob.glob(os.path.join(work, target, "*.symbols.json"))):
        for symbol in json.load(open(path, encoding="utf-8"))["symbols"]:
            precise = symbol["identifier"]["precise"]
            location = symbol.get("location")
            if "::SYNTHESIZED::" in precise or location is None:
                continue  # written by the compiler or inherited, not by us
            file = os.path.realpath(unquote(urlparse(location["uri"]).path))
            if not file.startswith(sources) or precise in seen:
                continue
            seen.add(precise)
            checked += 1
            lines = [line.get("text", "") for line in (symbol.get("docComment") or {}).get("lines", [])]
            if not any(text.strip() for text in lines):
                line = location["position"]["line"] + 1
                kind = symbol["kind"]["displayName"].lower()
                name = ".".join(symbol["pathComponents"])
                missing.append((os.path.relpath(file, os.path.dirname(sources.rstrip(os.sep))), line, kind, name))

if missing:
    for file, line, kind, name in sorted(missing):
        print(f"{file}:{line}: public {kind} `{name}` has no /// doc comment", file=sys.stderr)
    print(f"doc-comments: {len(missing)} of {checked} public symbols in {', '.join(targets)} have no doc comment",
          file=sys.stderr)
    sys.exit(1)
print(f"doc-comments: all {checked} public symbols in {', '.join(targets)} are documented")
PY
