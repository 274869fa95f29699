"""A tiny Gemma 4 checkpoint with random weights, made with no hub: `python3 tiny_gemma4.py OUT_DIR`.

Runs inside the CPU vehicle image (it has torch, transformers and tokenizers), so the host needs
nothing extra. Two decoder layers, one sliding and one global, with head sizes 32 and 64 (vLLM's
CPU attention takes a fixed list of head sizes; 16 fails at the first request). The tokenizer is
trained here on a small corpus and carries Gemma 4's turn, thinking and tool markers, plus the
`<tool_call>` pair the hermes tool parser looks up, and a chat template in Gemma 4's turn format.
Random weights answer nothing correctly: the checkpoint proves the serving path, not quality.
"""
import sys
from pathlib import Path

BOS, EOS, PAD, UNK = "<bos>", "<eos>", "<pad>", "<unk>"
MARKERS = ["<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>", "<|tool>", "<tool|>",
           "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", '<|"|>',
           "<tool_call>", "</tool_call>"]
VOCAB_SIZE = 1024
SEED = 1234

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
    "{% if part.type == 'text' %}{{ part.text }}{% endif %}{% endfor %}{% endif -%}"
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


def tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=[PAD, EOS, BOS, UNK] + MARKERS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   unk_token=UNK, additional_special_tokens=MARKERS)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def model(vocab_size: int, ids: dict):
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    torch.manual_seed(SEED)
    config = Gemma4TextConfig(
        vocab_size=vocab_size, vocab_size_per_layer_input=vocab_size, hidden_size_per_layer_input=16,
        hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"], sliding_window=64,
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, global_head_dim=64,
        max_position_embeddings=32768, pad_token_id=ids[PAD], eos_token_id=ids[EOS], bos_token_id=ids[BOS],
        architectures=["Gemma4ForCausalLM"], dtype="bfloat16")
    return Gemma4ForCausalLM(config).to(torch.bfloat16)


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in (PAD, EOS, BOS)}
    tok.save_pretrained(out)
    model(len(tok), ids).save_pretrained(out, safe_serialization=True)
    print(f"tiny Gemma 4 in {out}: vocab {len(tok)}, files {sorted(p.name for p in out.iterdir())}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: tiny_gemma4.py OUT_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
