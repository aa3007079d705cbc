# Shadows msgpack for TestStartFailsClearly: a helper started with this
# directory on PYTHONPATH fails at import, like an environment without dask.
raise ImportError("broken environment for the test")
