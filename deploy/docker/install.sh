#!/bin/sh
# install.sh WHEELS VENV VERSION: a new virtualenv at VENV with berth==VERSION and its
# dependencies, from WHEELS only (no index). The Dockerfile's runtime stage runs it;
# tests/deploy/test_image.py runs it too, then every entry point from that virtualenv.
set -eu
python -m venv "$2"
"$2/bin/python" -m pip install --no-cache-dir --no-index --find-links "$1" "berth==$3"
