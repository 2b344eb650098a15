# Sourced by .ci/setup (which installs them) and .ci/clients (which runs them): the
# Python client generators shops use, pinned, in a virtual environment of their own
# outside the checkout. openapi-generator-cli carries openapi-generator's jar (it runs
# on Java, from apt); python-dateutil is what openapi-python-client's output imports.
OPENAPI_PYTHON_CLIENT_VERSION=0.29.1
OPENAPI_GENERATOR_VERSION=7.26.0
CLIENTS_VENV="${XDG_CACHE_HOME:-$HOME/.cache}/seckill/clients-$OPENAPI_PYTHON_CLIENT_VERSION-$OPENAPI_GENERATOR_VERSION"
CLIENTS_PACKAGES=(
  "openapi-python-client==$OPENAPI_PYTHON_CLIENT_VERSION"
  "openapi-generator-cli==$OPENAPI_GENERATOR_VERSION"
  "python-dateutil==2.9.0.post0"
)
