#!/bin/sh
# Installs /pins/lock.txt into the venv at $VIRTUAL_ENV, every package checked by its hash and
# nothing resolved: the bases' one install step (base/Dockerfile, base/cpu/Dockerfile run it from
# their pins/ mount; extra arguments, e.g. --find-links /pins/wheels, go to the install).
# The installer is uv (/pins/installer.txt, locked by hash), in a venv of its own that is removed
# afterwards: it installs 199 packages in about a quarter of pip's time on a 2-core host
# (docs/benchmarks.md), and it is not part of the image.
# The host's CA bundle and package index settings arrive as BuildKit secrets (never build arguments,
# so none is stored in a layer or `docker history`): pip reads them as PIP_*, uv as UV_* and SSL_CERT_FILE.
set -eu
secret() { [ -s "/run/secrets/$1" ] && cat "/run/secrets/$1"; }
if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca SSL_CERT_FILE=/run/secrets/ca; fi
if url="$(secret pip-index-url)"; then export PIP_INDEX_URL="$url" UV_INDEX_URL="$url"; fi
if url="$(secret pip-extra-index-url)"; then export PIP_EXTRA_INDEX_URL="$url" UV_EXTRA_INDEX_URL="$url"; fi
if hosts="$(secret pip-trusted-host)"; then export PIP_TRUSTED_HOST="$hosts" UV_INSECURE_HOST="$hosts"; fi
installer="$(mktemp -d /tmp/installer.XXXXXX)"
trap 'rm -rf "$installer"' EXIT
python3 -m venv "$installer"
"$installer/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check --require-hashes --no-deps -r /pins/installer.txt
# --compile-bytecode: the server may run as any uid on a read-only root, where Python cannot write
# __pycache__, so the bytecode is made here (as pip does by default); copy: the cache is a mount.
UV_LINK_MODE=copy "$installer/bin/uv" pip install --no-config --python "$VIRTUAL_ENV/bin/python" \
    --require-hashes --no-deps --compile-bytecode "$@" -r /pins/lock.txt
