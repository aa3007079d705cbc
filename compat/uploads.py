"""Files uploaded to the scheduler (Client.upload_file), in every Python
process of ours.

distributed's Scheduler writes an uploaded file into its local directory
and imports it (core.Server.upload_file, utils.import_file): from then on
a graph whose pickle names the module by reference (a function of the
uploaded module, given to client.submit or map) unpickles on the
scheduler. Here the graphs are unpickled in the materializer helpers,
which Go starts and recycles at any time, and run_on_scheduler functions
and plugins run in the host, so:

- the host does the upload as distributed does (HostScheduler.upload_file:
  write, import, errors raised to the client), then appends the file's
  name to the manifest, a line per successful upload, in upload order;
- a helper, before anything that unpickles (catch_up), imports what the
  manifest gained since it last looked, in order: a helper started later
  imports every upload, and a file uploaded again is reloaded, as
  import_file reloads it.

The directory is the scheduler's local directory, which Go makes at start
and removes at shutdown, named by DASKGO_LOCAL_DIRECTORY.
"""

from __future__ import annotations

import logging
import os
import sys

logger = logging.getLogger("daskgo.uploads")

MANIFEST = ".uploads"


def local_directory():
    """The scheduler's local directory, None when Go named none."""
    return os.environ.get("DASKGO_LOCAL_DIRECTORY") or None


def record(filename):
    """Appends an uploaded and imported file to the manifest: one short
    line, written with one write, so a reader sees it whole or not at all."""
    with open(os.path.join(local_directory(), MANIFEST), "a") as f:
        f.write(os.path.basename(filename) + "\n")


def on_path(where):
    """Puts the local directory first on sys.path, as distributed's Server
    does at start: a file uploaded with load=False imports on first use."""
    if where not in sys.path:
        sys.path.insert(0, where)


_seen = 0  # bytes of the manifest this process has imported


def catch_up():
    """Imports the files uploaded since this process last looked (one stat
    when nothing changed). A file that no longer imports is logged and
    skipped: the graph that needs it then fails with the import's error."""
    global _seen
    where = local_directory()
    if where is None:
        return
    on_path(where)
    path = os.path.join(where, MANIFEST)
    try:
        if os.stat(path).st_size <= _seen:
            return
        with open(path, "rb") as f:
            f.seek(_seen)
            new = f.read()
    except FileNotFoundError:
        return
    except OSError as e:
        logger.warning("cannot read the uploads manifest %s: %r", path, e)
        return
    new = new[: new.rfind(b"\n") + 1]  # whole lines only
    _seen += len(new)
    from distributed.utils import import_file

    for name in new.decode().splitlines():
        try:
            import_file(os.path.join(where, name))
        except Exception as e:  # noqa: BLE001 - logged; the graph that needs it reports the failure
            logger.warning("uploaded file %s does not import here: %r", name, e)
