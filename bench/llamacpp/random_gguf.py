#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# random_gguf.py GGUF_PY_DIR TOKENIZER.gguf OUT.gguf [--layers N] [--embd N] [--ff N] [--heads N] [--kv-heads N]
# Writes a llama-architecture GGUF with random f16 weights (uniform in
# [-0.02, 0.02), seeded) and the tokenizer of TOKENIZER.gguf (stories260K's
# 512 tokens). Defaults: TinyLlama-1.1B's geometry (22 layers, 2048 wide,
# 32 heads, 4 KV heads, 5632 FFN): its text is meaningless, its prefill compute
# and KV sizes are those of a ~1B model (the small vocabulary leaves out the
# 2048 x 32000 embedding and output matrices, about 0.13 B parameters).
# GGUF_PY_DIR: the gguf-py folder of the llama.cpp tree tools/fetch-llama.sh
# unpacks (build/release/_deps/llama.cpp/llama.cpp/gguf-py). Needs python3-numpy.
import argparse
import sys

ap = argparse.ArgumentParser()
ap.add_argument("gguf_py")
ap.add_argument("tokenizer")
ap.add_argument("out")
ap.add_argument("--layers", type=int, default=22)
ap.add_argument("--embd", type=int, default=2048)
ap.add_argument("--ff", type=int, default=5632)
ap.add_argument("--heads", type=int, default=32)
ap.add_argument("--kv-heads", type=int, default=4)
a = ap.parse_args()
sys.path.insert(0, a.gguf_py)
import numpy as np  # noqa: E402
from gguf import GGUFReader, GGUFWriter, GGUFValueType  # noqa: E402

tok = GGUFReader(a.tokenizer)


def field(name):
    f = tok.fields[name]
    if f.types[0] == GGUFValueType.ARRAY:
        if f.types[1] == GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if f.types[0] == GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]][0].item()


tokens = field("tokenizer.ggml.tokens")
n_vocab = len(tokens)
E, F, H, HKV, L = a.embd, a.ff, a.heads, a.kv_heads, a.layers
hd = E // H
w = GGUFWriter(a.out, "llama")
w.add_name("random-weight llama (speckv bench)")
w.add_context_length(2048)
w.add_embedding_length(E)
w.add_feed_forward_length(F)
w.add_head_count(H)
w.add_head_count_kv(HKV)
w.add_block_count(L)
w.add_rope_dimension_count(hd)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type(1)  # mostly f16
w.add_tokenizer_model(field("tokenizer.ggml.model"))
w.add_token_list(tokens)
w.add_token_scores(field("tokenizer.ggml.scores"))
w.add_token_types(field("tokenizer.ggml.token_type"))
for k, fn in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id), ("unknown", w.add_unk_token_id)):
    fn(field(f"tokenizer.ggml.{k}_token_id"))

rng = np.random.default_rng(21)


def rand(*shape):
    return (rng.random(shape, dtype=np.float32) * 0.04 - 0.02).astype(np.float16)


ones = lambda n: np.ones(n, dtype=np.float32)  # noqa: E731
w.add_tensor("token_embd.weight", rand(n_vocab, E))
w.add_tensor("output_norm.weight", ones(E))
w.add_tensor("output.weight", rand(n_vocab, E))
for i in range(L):
    b = f"blk.{i}."
    w.add_tensor(b + "attn_norm.weight", ones(E))
    w.add_tensor(b + "attn_q.weight", rand(E, E))
    w.add_tensor(b + "attn_k.weight", rand(HKV * hd, E))
    w.add_tensor(b + "attn_v.weight", rand(HKV * hd, E))
    w.add_tensor(b + "attn_output.weight", rand(E, E))
    w.add_tensor(b + "ffn_norm.weight", ones(E))
    w.add_tensor(b + "ffn_gate.weight", rand(F, E))
    w.add_tensor(b + "ffn_down.weight", rand(E, F))
    w.add_tensor(b + "ffn_up.weight", rand(F, E))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
params = n_vocab * E * 2 + L * (2 * E * E + 2 * HKV * hd * E + 3 * E * F)
print(f"{a.out}: {L} layers, {E} wide, {H} heads ({HKV} KV), FFN {F}, vocab {n_vocab}: {params / 1e9:.3f} B parameters")
