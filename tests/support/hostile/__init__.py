"""One hostile harness for every surface that reads outside data (issue 60).

    files.py     hostile files: FIFO, devices, a folder, huge (sparse), deep JSON, not UTF-8, BOM and
                 CRLF, archive bombs and slips, valid JSON of another schema
    drive.py     runs one surface as a process, measured: exit, output, wall time, peak memory,
                 what it wrote, whether any child outlived it
    registry.py  every entry point registered with how to drive it, and the invariants stated once

tests/unit/test_hostile.py drives the host's surfaces with Hypothesis; tests/image/test_hostile_image.py
the image's entrypoint. A build.py subcommand or a reader of outside data left unregistered fails
tests/unit/test_hostile.py.
"""
