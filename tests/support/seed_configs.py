"""The two seed deployments: the env file each would use and the argv its runbook ran."""
from entrypoint.device import Device

SERVER = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
# What the entrypoint adds to the runbooks' argv: vLLM drains the requests in flight at a stop
# (STOP_GRACE_SECONDS' default, 60, less the HTTP drain bound and the margin), and a new request
# during that drain gets a 503 (entrypoint/stop_gate.py).
ON_STOP = ["--shutdown-timeout", "40", "--middleware", "entrypoint.stop_gate.RefuseWhileStopping"]
T4 = Device("Tesla T4", (7, 5), 65536, 1)
RTX_3090 = Device("NVIDIA GeForce RTX 3090", (8, 6), 101376, 1)

T4_E2B_ENV = {"MODEL": "/models/gemma-4-E2B-it-qat", "SERVED_MODEL_NAME": "gemma-4-e2b",
              "MAX_MODEL_LEN": "16384", "MAX_NUM_SEQS": "8", "GPU_MEMORY_UTILIZATION": "0.9"}
T4_E2B_ARGV = SERVER + ["--model", "/models/gemma-4-E2B-it-qat", "--served-model-name", "gemma-4-e2b",
                        "--host", "0.0.0.0", "--port", "8000", "--dtype", "float16", "--max-model-len", "16384",
                        "--max-num-seqs", "8", "--gpu-memory-utilization", "0.9", *ON_STOP]

RTX_3090_12B_ENV = {"MODEL": "/models/gemma-4-12b-it-qat", "SERVED_MODEL_NAME": "gemma-4-12b",
                    "DRAFTER": "/models/gemma-4-12b-it-assistant-bf16",
                    "SPECULATIVE_CONFIG": '{"num_speculative_tokens": 4}',
                    "MAX_MODEL_LEN": "262144", "GPU_MEMORY_UTILIZATION": "0.9",
                    "REASONING_PARSER": "gemma4", "TOOL_CALL_PARSER": "gemma4"}
RTX_3090_12B_ARGV = SERVER + [
    "--model", "/models/gemma-4-12b-it-qat", "--served-model-name", "gemma-4-12b", "--host", "0.0.0.0",
    "--port", "8000", "--dtype", "auto", "--max-model-len", "262144", "--gpu-memory-utilization", "0.9",
    "--speculative-config", '{"model":"/models/gemma-4-12b-it-assistant-bf16","num_speculative_tokens":4}',
    "--reasoning-parser", "gemma4", "--enable-auto-tool-choice", "--tool-call-parser", "gemma4", *ON_STOP]

