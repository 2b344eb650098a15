# Sourced by .ci/setup (which installs it) and .ci/fuzz (which runs it): the API
# fuzzer, pinned, in a Python virtual environment of its own outside the checkout.
SCHEMATHESIS_VERSION=4.32.5
SCHEMATHESIS_VENV="${XDG_CACHE_HOME:-$HOME/.cache}/seckill/schemathesis-$SCHEMATHESIS_VERSION"
SCHEMATHESIS="$SCHEMATHESIS_VENV/bin/st"
