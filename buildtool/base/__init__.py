"""`build.py base`: a vLLM OpenAI base image from PyPI wheels, on an OS image pulled or bootstrapped."""
