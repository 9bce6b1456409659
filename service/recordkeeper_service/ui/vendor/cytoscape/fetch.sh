#!/usr/bin/env bash
# Re-fetch the vendored Cytoscape.js build (see FETCH.md). Run from this directory.
set -euo pipefail
version=3.35.0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack "cytoscape@$version" >/dev/null)
echo "058a81a7534777ea68dc737e9b77bd5b701e00acd9bee246245a576eeeac32e6  $work/cytoscape-$version.tgz" \
  | sha256sum --check
tar -xzf "$work/cytoscape-$version.tgz" -C "$work"
cp "$work/package/dist/cytoscape.esm.min.mjs" cytoscape.esm.min.js
cp "$work/package/LICENSE" LICENSE.txt
