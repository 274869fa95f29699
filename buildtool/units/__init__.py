"""`build.py units`: one unit model (spec) rendered per format (compose, quadlet, ...)."""
