"""What the image facts of vLLM 0.33.0 record (imagefacts/read.py, written in the image at build
time), for the unit tier on a host without the image: each quantization method's minimum compute
capability, and the `vllm_values` section (value lists and the attention backends' probed
capabilities, as 75 for 7.5). The image tier reads the real file."""
from __future__ import annotations

from imagefacts.shape import VllmValues, vllm_values

VLLM_033_MIN = {
    "auto_awq": 75, "auto_gptq": 60, "awq": 75, "awq_marlin": 75, "compressed-tensors": 70, "deepseek_v4_fp8": 75,
    "experts_int8": 80, "fbgemm_fp8": 80, "fp8": 75, "fp8_per_block": 75, "fp8_per_channel": 75, "fp8_per_tensor": 75,
    "fp_quant": 100, "gpt_oss_mxfp4": 80, "gptq": 60, "gptq_marlin": 60, "humming": 75, "inc": 60,
    "int8_per_channel_weight_only": 75, "modelopt": 80, "modelopt_fp4": 75, "modelopt_mixed": 75,
    "modelopt_mxfp8": 80, "moe_wna16": 70, "mxfp4": 80, "mxfp8": 80, "nvfp4_per_token": 75, "online": 75,
    "quark": 70, "torchao": 75,
}

PROBED = [60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121]
EVERY, AMPERE_ON = PROBED, PROBED[6:]
SM90, SM100, SM120 = [90], [100, 101, 103], [120, 121]

VLLM_033_VALUES_SECTION = {
    "load_formats": ["auto", "dummy", "fastsafetensors", "hf", "instanttensor", "ipc_cache", "mistral", "modelexpress",
                     "npcache", "pt", "runai_streamer", "runai_streamer_sharded", "safetensors", "sharded_state",
                     "tensorizer"],
    "config_formats": ["auto", "hf", "mistral"],
    "mamba_backends": ["triton", "flashinfer", "cpu"],
    "deprecated_quantization": ["fbgemm_fp8", "fp_quant"],
    "probed_capabilities": PROBED,
    # CUTLASS_MLA and FLASH_ATTN_MLA are absent: their classes do not import on a build host without a driver
    "attention_backends": {
        "FLASH_ATTN": AMPERE_ON, "FLASH_ATTN_DIFFKV": AMPERE_ON, "FLASHINFER": AMPERE_ON,
        "TRITON_ATTN": EVERY, "TRITON_ATTN_DIFFKV": EVERY, "TRITON_MLA": EVERY, "FLEX_ATTENTION": EVERY,
        "ROCM_ATTN": EVERY, "CPU_ATTN": EVERY, "TRITON_MSA": EVERY, "TURBOQUANT": EVERY,
        "TRITON_FLASH_ATTN": SM90, "FLASHINFER_MLA_SPARSE_SM90": SM90, "FLASH_ATTN_MLA_SPARSE": SM90, "HPC_ATTN": SM90,
        "FLASHMLA": SM90 + SM100, "FLASHMLA_SPARSE": SM90 + SM100, "FLASHMLA_SPARSE_DSV4": SM90 + SM100,
        "TRITON_FLASHINFER": SM100, "FLASHINFER_MLA": SM100, "TOKENSPEED_MLA": SM100, "FLASHINFER_MLA_SPARSE": SM100,
        "FLASH_ATTN_MLA_SPARSE_FA4": SM100, "FLASHINFER_MLA_SPARSE_DSV4": SM100 + SM120,
        "FLASHINFER_MLA_SPARSE_SM120": SM120, "B12X": SM120,
    },
}
VLLM_033_VALUES: VllmValues = vllm_values(VLLM_033_VALUES_SECTION)
