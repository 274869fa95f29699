"""A tiny Gemma 4 checkpoint with random weights, made with no hub: `python3 tiny_gemma4.py [--multimodal] OUT_DIR`.

Runs inside the CPU vehicle image (it has torch, transformers and tokenizers), so the host needs
nothing extra. Two decoder layers, one sliding and one global, with head sizes 32 and 64 (vLLM's
CPU attention takes a fixed list of head sizes; 16 fails at the first request). The tokenizer is
trained here on a small corpus and carries Gemma 4's turn, thinking and tool markers, plus the
`<tool_call>` pair the hermes tool parser looks up, and a chat template in Gemma 4's turn format.
Random weights answer nothing correctly: the checkpoint proves the serving path, not quality.

`--multimodal` makes `Gemma4ForConditionalGeneration` instead, as Gemma 4 E2B/E4B ship: the same
decoder plus a one-layer vision tower (70 soft tokens an image, the fewest Gemma 4 takes) and a
one-layer audio tower, Gemma 4's image and audio markers in the tokenizer, a chat template that
places an image part as `<|image|>` and an audio part as `<|audio|>` (vLLM expands each into its
begin marker, soft tokens and end marker), and transformers' own Gemma4Processor saved beside it
(it imports torchvision, which the vehicle carries without its C++ operators: base/cpu/cpu_fixes.py).
test_modalities.py serves it and asks it every modality.
"""
import sys
from pathlib import Path

BOS, EOS, PAD, UNK = "<bos>", "<eos>", "<pad>", "<unk>"
MARKERS = ["<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>", "<|tool>", "<tool|>",
           "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", '<|"|>',
           "<tool_call>", "</tool_call>"]
# --multimodal: Gemma 4's media markers, as its tokenizer names them (begin, soft token, end).
MEDIA = {"boi_token": "<|image>", "image_token": "<|image|>", "eoi_token": "<image|>",
         "boa_token": "<|audio>", "audio_token": "<|audio|>", "eoa_token": "<audio|>"}
VIDEO = "<|video|>"
IMAGE_SOFT_TOKENS = 70  # the fewest of Gemma 4's image budgets (70, 140, 280, 560, 1120)
VOCAB_SIZE = 1024
SEED = 1234

TEXT_PART = "{% if part.type == 'text' %}{{ part.text }}{% endif %}"
MEDIA_PARTS = ("{% if part.type == 'text' %}{{ part.text }}{% elif part.type == 'image' %}<|image|>"
               "{% elif part.type == 'audio' %}<|audio|>{% endif %}")
CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- if tools or enable_thinking -%}<|turn>system\n"
    "{%- if enable_thinking %}<|think|>{% endif -%}"
    "{%- for tool in tools or [] %}<|tool>{{ tool | tojson }}<tool|>{% endfor -%}"
    "<turn|>\n{%- endif -%}"
    "{%- for message in messages -%}"
    "<|turn>{{ 'model' if message.role == 'assistant' else message.role }}\n"
    "{%- if message.content is string %}{{ message.content }}"
    "{%- elif message.content %}{% for part in message.content %}"
    "PARTS{% endfor %}{% endif -%}"
    "<turn|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}<|turn>model\n{% endif -%}"
)

CORPUS = [
    "What is 17*23? The answer is 391.",
    "What is the capital of Australia? Canberra is the capital of Australia.",
    "What is the chemical symbol for gold? The symbol for gold is Au.",
    "What is the weather in Paris? Call get_weather with the city Paris.",
    "Think step by step, then answer: what is 6 times 7? It is 42.",
    "The quick brown fox jumps over the lazy dog. 0 1 2 3 4 5 6 7 8 9",
    "A red square. A tone, a beep, a hum. Hello, world! How can I help you today?",
]


def tokenizer(multimodal: bool = False):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = MARKERS + (list(MEDIA.values()) + [VIDEO] if multimodal else [])
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=[PAD, EOS, BOS, UNK] + specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   unk_token=UNK, additional_special_tokens=specials,
                                   **({"extra_special_tokens": MEDIA} if multimodal else {}))
    fast.chat_template = chat_template(multimodal)
    return fast


def chat_template(multimodal: bool) -> str:
    return CHAT_TEMPLATE.replace("PARTS", MEDIA_PARTS if multimodal else TEXT_PART)


def text_config(vocab_size: int, ids: dict, **extra):
    from transformers import Gemma4TextConfig

    return Gemma4TextConfig(
        vocab_size=vocab_size, vocab_size_per_layer_input=vocab_size, hidden_size_per_layer_input=16,
        hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"], sliding_window=64,
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, global_head_dim=64,
        max_position_embeddings=32768, pad_token_id=ids[PAD], eos_token_id=ids[EOS], bos_token_id=ids[BOS],
        **extra)


def model(vocab_size: int, ids: dict):
    import torch
    from transformers import Gemma4ForCausalLM

    torch.manual_seed(SEED)
    config = text_config(vocab_size, ids, architectures=["Gemma4ForCausalLM"], dtype="bfloat16")
    return Gemma4ForCausalLM(config).to(torch.bfloat16)


def multimodal_model(vocab_size: int, ids: dict):
    import torch
    from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4VisionConfig

    torch.manual_seed(SEED)
    vision = Gemma4VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                                num_key_value_heads=2, head_dim=32, position_embedding_size=1024)
    vision.default_output_length = IMAGE_SOFT_TOKENS  # vLLM reads it: the soft tokens an image gets at most
    audio = Gemma4AudioConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                              subsampling_conv_channels=[128, 8], output_proj_dims=64)  # 128: the mel bins
    config = Gemma4Config(
        text_config=text_config(vocab_size, ids), vision_config=vision, audio_config=audio,
        boi_token_id=ids[MEDIA["boi_token"]], image_token_id=ids[MEDIA["image_token"]],
        eoi_token_id=ids[MEDIA["eoi_token"]], boa_token_id=ids[MEDIA["boa_token"]],
        audio_token_id=ids[MEDIA["audio_token"]], eoa_token_index=ids[MEDIA["eoa_token"]],
        video_token_id=ids[VIDEO], architectures=["Gemma4ForConditionalGeneration"], dtype="bfloat16")
    return Gemma4ForConditionalGeneration(config).to(torch.bfloat16)


def save_processor(tok, out: Path) -> None:
    """transformers' own Gemma4Processor (tokenizer, image processor, audio feature extractor, video
    processor, chat template) saved: processor_config.json and the tokenizer's files."""
    from transformers import Gemma4AudioFeatureExtractor, Gemma4ImageProcessor, Gemma4Processor, Gemma4VideoProcessor

    Gemma4Processor(feature_extractor=Gemma4AudioFeatureExtractor(),
                    image_processor=Gemma4ImageProcessor(max_soft_tokens=IMAGE_SOFT_TOKENS),
                    tokenizer=tok, video_processor=Gemma4VideoProcessor(), chat_template=tok.chat_template,
                    image_seq_length=IMAGE_SOFT_TOKENS).save_pretrained(out)


def main(out: Path, multimodal: bool = False) -> int:
    out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer(multimodal)
    ids = {t: tok.convert_tokens_to_ids(t) for t in (PAD, EOS, BOS, *((VIDEO, *MEDIA.values()) if multimodal else ()))}
    if multimodal:
        save_processor(tok, out)
        multimodal_model(len(tok), ids).save_pretrained(out, safe_serialization=True)
    else:
        tok.save_pretrained(out)
        model(len(tok), ids).save_pretrained(out, safe_serialization=True)
    print(f"tiny Gemma 4 in {out}: vocab {len(tok)}, files {sorted(p.name for p in out.iterdir())}")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    multimodal = args[:1] == ["--multimodal"]
    if len(args) != 1 + multimodal:
        print("usage: tiny_gemma4.py [--multimodal] OUT_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(args[-1]), multimodal))
