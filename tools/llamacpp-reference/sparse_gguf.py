"""What the make_*_gguf.py scripts share: a vocabulary llama.cpp's loader accepts,
tensor descriptions without data, and the data region left as a hole in a sparse file."""
import os

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, GGML_QUANT_SIZES


def add_vocab(w: GGUFWriter, vocab: int, last: tuple = ()) -> None:
    """A SentencePiece-style vocabulary: <unk>, <s>, </s>, plain pieces, then `last` (tokens
    an architecture's loader looks up by name)."""
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"t{i}".encode() for i in range(3, vocab - len(last))]
    tokens += [t.encode() for t in last]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([2, 3, 3] + [1] * (vocab - 3))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def add_tensor(w: GGUFWriter, name: str, shape: tuple, t: GGMLQuantizationType) -> None:
    """Describes a tensor (shape outermost first) whose bytes follow from its type's blocks."""
    block, size = GGML_QUANT_SIZES[t]
    n = int(np.prod(shape))
    dtype = np.float16 if t == GGMLQuantizationType.F16 else np.float32
    w.add_tensor_info(name, shape, np.dtype(dtype), n // block * size, raw_dtype=t)


def add_embeddings(w: GGUFWriter, vocab: int, d: int, tied: bool) -> None:
    """The token embedding (f16), the final norm (f32) and, unless tied, the output matrix."""
    add_tensor(w, "token_embd.weight", (vocab, d), GGMLQuantizationType.F16)
    add_tensor(w, "output_norm.weight", (d,), GGMLQuantizationType.F32)
    if not tied:
        add_tensor(w, "output.weight", (vocab, d), GGMLQuantizationType.F16)


def finish_sparse(w: GGUFWriter, out: str) -> None:
    """Writes the header and tensor descriptions, and leaves every tensor's (aligned) data a
    hole."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    fout.flush()
    data_start = w.ggml_pad(fout.tell(), w.data_alignment)
    total = sum(w.ggml_pad(ti.nbytes, w.data_alignment) for ti in w.tensors[0].values())
    w.close()
    with open(out, "r+b") as f:
        f.truncate(data_start + total)
    print(f"{out}: {os.path.getsize(out)} bytes apparent")
