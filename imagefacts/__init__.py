"""What the build proves about the image's own stack, written once into IMAGE_FACTS
(contract/layout.py) by `python3 -m imagefacts write PATH` inside the image, after vLLM, torch,
Triton and the extras are in place. The entrypoint reads the file (entrypoint/image_facts.py) instead of
importing torch or vLLM at every start:

- packages: the versions of vllm, torch and triton the facts were read from (a mismatch at start,
  say after a `pip install -U` in a derived image, sends the preflight back to importing them);
- torch: its CUDA version and compiled arch list;
- server_parser: the option table of the argument parser `python3 -m vllm.entrypoints.openai.api_server`
  builds (every option string, its dest, its nargs, and for an option that takes a value its type
  by name, choices and const: value_types.py), so the entrypoint judges the argv it will exec with
  vLLM's own options, aliases and value types;
- parsers: the tool-call and reasoning parser names vLLM registers;
- quantization: each quantization method's minimum compute capability (vLLM's get_min_capability);
- vllm_values: the values vLLM accepts for options its parser takes as any text (load formats, config
  formats, Mamba backends), its deprecated quantization methods, and per attention backend the
  compute capabilities (of a fixed probed list) its class supports: the lists the re-judged options
  are checked against (shape.py VllmValues), so no copy of them lives in entrypoint/.

read.py imports torch and vLLM and runs at build time only; shape.py (the file's shape, the option
table and the parser rebuilt from it) is standard library, imported by the entrypoint at every start.
It lives here, not in contract/, because the Dockerfile copies contract/ before the fit check: a
change to the facts must not re-run the fit check.
"""
