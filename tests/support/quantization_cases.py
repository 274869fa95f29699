"""Generated --quantization flags and checkpoint quantization configs (Hypothesis strategies), for the
unit tier's properties of entrypoint/checks/quant_method.py and the image tier's agreement with vLLM's
own ModelConfig._verify_quantization: vLLM 0.33.0's methods and names it does not know, the fields its
override rules read (bits, desc_act, group_size, dynamic, ModelOpt's quant_algo and producer, Kimi-K3's
format), model types and architectures whose rules or config hooks differ."""
from hypothesis import strategies as st

from tests.support.vllm_033_facts import VLLM_033_MIN

METHODS = sorted(VLLM_033_MIN) + ["marlin", "auto-round", "bitsandbytes", ""]
quantization_configs = st.none() | st.fixed_dictionaries(
    {"quant_method": st.sampled_from(METHODS) | st.text(max_size=8)},
    optional={"bits": st.sampled_from([2, 3, 4, 8, True, "4"]), "desc_act": st.booleans(),
              "group_size": st.sampled_from([-1, 32, 128, None]), "format": st.just("mxfp4-pack-quantized"),
              "quant_algo": st.sampled_from(["FP8", "NVFP4", "MXFP8", "MIXED_PRECISION", "x"]),
              "quantization": st.fixed_dictionaries({"quant_algo": st.sampled_from(["FP8", "NVFP4", "w4a16_nvfp4"])}),
              "producer": st.just({"name": "modelopt"}),
              "dynamic": st.dictionaries(st.sampled_from(["-:a", "+:b", "c"]),
                                         st.fixed_dictionaries({"desc_act": st.booleans()}), max_size=2)})
flags = st.none() | st.sampled_from(METHODS) | st.text(max_size=10)
model_types = st.sampled_from(["llama", "gpt_oss", "deepseek_v4", "deepseek_v41_text", "mixtral", "kimi_k3"])
ARCHITECTURES = {"llama": "LlamaForCausalLM", "gpt_oss": "GptOssForCausalLM", "deepseek_v4": "DeepseekV4ForCausalLM",
                 "deepseek_v41_text": "DeepseekV41ForCausalLM", "mixtral": "MixtralForCausalLM",
                 "kimi_k3": "KimiK3ForConditionalGeneration"}
capabilities = st.sampled_from([(6, 1), (7, 0), (7, 5), (8, 0), (8, 6), (9, 0), (10, 0), (12, 0)])


@st.composite
def config_jsons(draw) -> dict:
    """A config.json with a model type, its architecture and maybe a quantization_config."""
    model_type = draw(model_types)
    found = {"model_type": model_type, "architectures": [ARCHITECTURES[model_type]]}
    quantization = draw(quantization_configs)
    if quantization is not None:
        found["quantization_config"] = quantization
    return found
