#!/usr/bin/env bash
# Build (or find cached) control-plane binaries: see conformance/binaries/build-controlplane.sh.
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/conformance/binaries/build-controlplane.sh" "$@"
