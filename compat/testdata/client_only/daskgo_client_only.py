"""Importable only by capture_update_graph.py (it adds this directory to
sys.path); the materializer helper cannot import it, which reproduces a
client whose environment has a library the scheduler's lacks."""


def double(x):
    return 2 * x
