"""vllm-turing patches: the Turing clamp (turing_clamp) and its build-time fit check."""
