#!/bin/sh
# build-wheels.sh SOURCE WHEELS: berth's wheel and every dependency's, into WHEELS.
# The Dockerfile's build stage runs it; tests/deploy/test_image.py runs it too.
set -eu
python -m pip wheel --no-cache-dir --wheel-dir "$2" "$1"
